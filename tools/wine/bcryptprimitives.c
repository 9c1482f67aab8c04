/* bcryptprimitives.dll for Wine releases that lack it (Debian 12's Wine 8.0).
 * Go programs since Go 1.24 load it from system32 at start-up for one
 * function, ProcessPrng (random bytes, never fails); without it the runtime
 * stops before main ("bcryptprimitives.dll not found"). This shim answers
 * ProcessPrng with BCryptGenRandom, which Wine's bcrypt.dll has. Only the
 * Windows test runs under Wine use it (tools/wine/run); real Windows has the
 * system's own DLL. */
#include <windows.h>
#include <bcrypt.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0)
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
