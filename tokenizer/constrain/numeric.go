package constrain

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// numRange is what a number's value must be: bounds (nil: none, each
// inclusive unless ex) and, for integers, a divisor. Integers' bounds are
// kept as inclusive integers. Values are exact (big.Rat): a bound of
// 9007199254740993 is that integer.
type numRange struct {
	integer    bool
	lo, hi     *big.Rat
	loEx, hiEx bool
	mult       *big.Int
}

// readRange reads minimum, maximum, exclusiveMinimum, exclusiveMaximum and
// multipleOf (integers) from m; nil when m has none of them.
func readRange(m map[string]json.RawMessage, integer bool) (*numRange, error) {
	r := &numRange{integer: integer}
	any := false
	num := func(k string) (*big.Rat, bool, error) {
		v, ok := m[k]
		if !ok {
			return nil, false, nil
		}
		t := strings.TrimSpace(string(v))
		if t == "true" || t == "false" { // draft 4: a flag on minimum/maximum
			return nil, t == "true", nil
		}
		x, err := boundRat(k, t)
		if err != nil {
			return nil, false, err
		}
		any = true
		return x, false, nil
	}
	var err error
	var flagLo, flagHi bool
	var exLo, exHi *big.Rat
	if r.lo, _, err = num("minimum"); err != nil {
		return nil, err
	}
	if r.hi, _, err = num("maximum"); err != nil {
		return nil, err
	}
	if exLo, flagLo, err = num("exclusiveMinimum"); err != nil {
		return nil, err
	}
	if exHi, flagHi, err = num("exclusiveMaximum"); err != nil {
		return nil, err
	}
	r.loEx, r.hiEx = flagLo && r.lo != nil, flagHi && r.hi != nil
	if exLo != nil && (r.lo == nil || exLo.Cmp(r.lo) >= 0) {
		r.lo, r.loEx = exLo, true
	}
	if exHi != nil && (r.hi == nil || exHi.Cmp(r.hi) <= 0) {
		r.hi, r.hiEx = exHi, true
	}
	if v, ok := m["multipleOf"]; ok {
		x, err := boundRat("multipleOf", strings.TrimSpace(string(v)))
		if err != nil || x.Sign() <= 0 {
			return nil, fmt.Errorf("multipleOf must be a positive number of at most %d digits", maxBoundDigits)
		}
		if !integer || !x.IsInt() {
			return nil, fmt.Errorf("schema keyword %q is supported on integers, by an integer", "multipleOf")
		}
		if x.Num().Cmp(big.NewInt(1)) != 0 {
			r.mult = new(big.Int).Set(x.Num())
		}
		any = true
	}
	if !any {
		return nil, nil
	}
	if integer {
		r.toIntegers()
	}
	if !r.nonEmpty() {
		return nil, fmt.Errorf("no number fits the bounds (minimum %s, maximum %s)", ratText(r.lo), ratText(r.hi))
	}
	return r, nil
}

// maxBoundDigits bounds a bound's digits and exponent, so no schema can
// make the exact arithmetic costly (1e999999999 would be a billion
// digits; a completion's search is quadratic in the digits).
const maxBoundDigits = 40

// errBigBound is a bound beyond what is held.
var errBigBound = fmt.Errorf("bounds beyond ±1e%d are not supported", maxBoundDigits)

// boundRat reads a JSON number exactly, refusing one with more than
// maxBoundDigits digits or an exponent beyond ±maxBoundDigits.
func boundRat(k, t string) (*big.Rat, error) {
	mant, exp, hasExp := strings.Cut(strings.ToLower(t), "e")
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
		if err != nil {
			return nil, fmt.Errorf("%s must be a number", k)
		}
		if e > maxBoundDigits || e < -maxBoundDigits {
			return nil, fmt.Errorf("%s %s: %w", k, t, errBigBound)
		}
	}
	if len(mant) > maxBoundDigits+2 {
		return nil, fmt.Errorf("%s has more than %d digits: %w", k, maxBoundDigits, errBigBound)
	}
	x, ok := new(big.Rat).SetString(t)
	if !ok || strings.ContainsAny(t, `"[{`) {
		return nil, fmt.Errorf("%s must be a number", k)
	}
	return x, nil
}

func ratText(x *big.Rat) string {
	if x == nil {
		return "none"
	}
	return x.RatString()
}

// toIntegers makes an integer range's bounds inclusive integers.
func (r *numRange) toIntegers() {
	if r.lo != nil {
		c := ceilRat(r.lo)
		if r.loEx && r.lo.IsInt() {
			c.Add(c, big.NewInt(1))
		}
		r.lo, r.loEx = new(big.Rat).SetInt(c), false
	}
	if r.hi != nil {
		f := floorRat(r.hi)
		if r.hiEx && r.hi.IsInt() {
			f.Sub(f, big.NewInt(1))
		}
		r.hi, r.hiEx = new(big.Rat).SetInt(f), false
	}
}

func floorRat(x *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int)) // Euclidean: floor for a positive divisor
	_ = m
	return q
}

func ceilRat(x *big.Rat) *big.Int {
	f := floorRat(x)
	if !x.IsInt() {
		f.Add(f, big.NewInt(1))
	}
	return f
}

// nonEmpty reports whether some value fits r.
func (r *numRange) nonEmpty() bool {
	return r.hits(nil, nil, false, false)
}

// hits reports whether a value of the interval from a to b (nil: no end;
// closed at an end when aIn/bIn) fits r. Integer ranges take integer
// intervals.
func (r *numRange) hits(a, b *big.Rat, aIn, bIn bool) bool {
	ok, _ := r.hitsAt(a, b, aIn, bIn)
	return ok
}

// hitsAt is hits, with (integer ranges, when the interval has a start) the
// smallest fitting integer.
func (r *numRange) hitsAt(a, b *big.Rat, aIn, bIn bool) (bool, *big.Int) {
	lo, loIn := a, aIn
	if r.lo != nil && (lo == nil || r.lo.Cmp(lo) > 0 || r.lo.Cmp(lo) == 0 && r.loEx) {
		lo, loIn = r.lo, !r.loEx
	}
	hi, hiIn := b, bIn
	if r.hi != nil && (hi == nil || r.hi.Cmp(hi) < 0 || r.hi.Cmp(hi) == 0 && r.hiEx) {
		hi, hiIn = r.hi, !r.hiEx
	}
	if !r.integer {
		if lo == nil || hi == nil {
			return true, nil
		}
		c := lo.Cmp(hi)
		return c < 0 || c == 0 && loIn && hiIn, nil
	}
	// integers: the smallest fitting integer at or above lo, then a multiple
	var x *big.Int
	if lo != nil {
		x = ceilRat(lo)
		if !loIn && lo.IsInt() {
			x.Add(x, big.NewInt(1))
		}
	}
	if r.mult != nil && x != nil {
		q := new(big.Int).Add(x, new(big.Int).Sub(r.mult, big.NewInt(1)))
		q.Div(q, r.mult) // Euclidean division: ceil(x/m) for m > 0
		x = q.Mul(q, r.mult)
	}
	if hi == nil || x == nil {
		return true, x
	}
	y := floorRat(hi)
	if !hiIn && hi.IsInt() {
		y.Sub(y, big.NewInt(1))
	}
	return x.Cmp(y) <= 0, x
}

// numPrefix splits a number's text so far: sign, integer digits, whether
// a '.' was read, fraction digits.
func numPrefix(t string) (neg bool, ip string, dot bool, fp string) {
	if strings.HasPrefix(t, "-") {
		neg, t = true, t[1:]
	}
	ip, fp, dot = strings.Cut(t, ".")
	return
}

var ten = big.NewInt(10)

func pow10(k int) *big.Int { return new(big.Int).Exp(ten, big.NewInt(int64(k)), nil) }

// feasible reports whether the number text t (a valid prefix of a JSON
// number without an exponent) can still become a value of r.
func (r *numRange) feasible(t string) bool {
	neg, ip, dot, fp := numPrefix(t)
	// try checks the magnitudes from a to b (b nil: no end), mirrored when negative
	try := func(a, b *big.Rat, bIn bool) bool {
		if !neg {
			return r.hits(a, b, true, bIn)
		}
		var na *big.Rat
		if b != nil {
			na = new(big.Rat).Neg(b)
		}
		return r.hits(na, new(big.Rat).Neg(a), bIn, true)
	}
	if ip == "" {
		return try(new(big.Rat), nil, false)
	}
	p, _ := new(big.Int).SetString(ip, 10)
	if dot {
		v := new(big.Rat).SetInt(p)
		step := new(big.Rat).SetFrac(big.NewInt(1), pow10(len(fp)))
		if fp != "" {
			f, _ := new(big.Int).SetString(fp, 10)
			v.Add(v, new(big.Rat).SetFrac(f, pow10(len(fp))))
		}
		return try(v, new(big.Rat).Add(v, step), false)
	}
	one := big.NewInt(1)
	if ip == "0" {
		if r.integer {
			return try(new(big.Rat), new(big.Rat), true)
		}
		return try(new(big.Rat), new(big.Rat).SetInt64(1), false)
	}
	// the integers p*10^k .. (p+1)*10^k - 1 (numbers: up to (p+1)*10^k, open)
	end := r.hi
	if neg {
		end = r.lo
	}
	if end == nil {
		return true // no bound on that side: long enough values fit
	}
	bound := new(big.Rat).Abs(end)
	for k := 0; ; k++ {
		scale := pow10(k)
		a := new(big.Rat).SetInt(new(big.Int).Mul(p, scale))
		if a.Cmp(bound) > 0 {
			return false
		}
		bi := new(big.Int).Mul(new(big.Int).Add(p, one), scale)
		if r.integer {
			if try(a, new(big.Rat).SetInt(bi.Sub(bi, one)), true) {
				return true
			}
		} else if try(a, new(big.Rat).SetInt(bi), false) {
			return true
		}
	}
}

// fits reports whether the whole number text t is a value of r.
func (r *numRange) fits(t string) bool {
	v, ok := new(big.Rat).SetString(t)
	if !ok {
		return false
	}
	return r.hits(v, v, true, true)
}

// maxNumLen bounds the completions of a number tried (a JSON bound has
// finitely many digits, so a fitting value is never longer than the bounds
// and the prefix together).
const maxNumLen = 2*maxBoundDigits + 16

// completion returns the shortest bytes that make the number text t a
// value of r (t "" is before the number), and whether there are any: the
// shortest length with a fitting value, and that value.
func (r *numRange) completion(t string) ([]byte, bool) {
	for l := 0; l <= maxNumLen; l++ {
		if w := r.exactly(t, l); w != "" {
			return []byte(w[len(t):]), true
		}
	}
	return nil, false
}

// exactly returns a whole value of r that is the number text t and l
// more bytes ("" if there is none).
func (r *numRange) exactly(t string, l int) string {
	if !numText(t, r.integer) {
		return ""
	}
	if t == "" && l > 0 {
		if w := r.exactly("-", l-1); w != "" {
			return w
		}
	}
	neg, ip, dot, fp := numPrefix(t)
	if dot {
		if fp == "" && l == 0 {
			return ""
		}
		p, _ := new(big.Int).SetString(ip+fp, 10)
		scale := pow10(l)
		lo := new(big.Int).Mul(p, scale)
		return r.grid(lo, new(big.Int).Add(lo, new(big.Int).Sub(scale, big.NewInt(1))), len(ip)+len(fp)+l, len(fp)+l, neg)
	}
	for j := 0; j <= l; j++ { // j more integer digits, then maybe '.' and fraction digits
		a, b, ok := intPart(ip, j)
		if !ok {
			continue
		}
		width := len(ip) + j
		if j == l {
			if w := r.grid(a, b, width, 0, neg); w != "" {
				return w
			}
			continue
		}
		f := l - j - 1
		if r.integer || f < 1 {
			continue
		}
		scale := pow10(f)
		lo := new(big.Int).Mul(a, scale)
		hi := new(big.Int).Sub(new(big.Int).Mul(new(big.Int).Add(b, big.NewInt(1)), scale), big.NewInt(1))
		if w := r.grid(lo, hi, width+f, f, neg); w != "" {
			return w
		}
	}
	return ""
}

// intPart is the magnitudes of the integer part ip followed by j more
// digits (no leading zeros), as an interval.
func intPart(ip string, j int) (a, b *big.Int, ok bool) {
	switch {
	case ip == "" && j == 0, ip == "0" && j > 0:
		return nil, nil, false
	case ip == "" && j == 1:
		return big.NewInt(0), big.NewInt(9), true
	case ip == "":
		return pow10(j - 1), new(big.Int).Sub(pow10(j), big.NewInt(1)), true
	}
	p, _ := new(big.Int).SetString(ip, 10)
	scale := pow10(j)
	a = new(big.Int).Mul(p, scale)
	return a, new(big.Int).Add(a, new(big.Int).Sub(scale, big.NewInt(1))), true
}

// grid returns the text of a value ±n/10^f that fits r for some n in
// [lo, hi], its digits zero-padded to width ("" if none).
func (r *numRange) grid(lo, hi *big.Int, width, f int, neg bool) string {
	scale := new(big.Rat).SetInt(pow10(f))
	g := &numRange{integer: true, loEx: r.loEx, hiEx: r.hiEx}
	if r.lo != nil {
		g.lo = new(big.Rat).Mul(r.lo, scale)
	}
	if r.hi != nil {
		g.hi = new(big.Rat).Mul(r.hi, scale)
	}
	if f == 0 {
		g.mult = r.mult
	}
	g.toIntegers()
	a, b := new(big.Rat).SetInt(lo), new(big.Rat).SetInt(hi)
	if neg {
		a, b = new(big.Rat).Neg(b), new(big.Rat).Neg(a)
	}
	ok, x := g.hitsAt(a, b, true, true)
	if !ok {
		return ""
	}
	digits := new(big.Int).Abs(x).String()
	if len(digits) < width {
		digits = strings.Repeat("0", width-len(digits)) + digits
	}
	if f > 0 {
		digits = digits[:len(digits)-f] + "." + digits[len(digits)-f:]
	}
	if neg {
		digits = "-" + digits
	}
	return digits
}

// numText reports whether t is a valid prefix of a JSON number without
// an exponent (no '.' for integers).
func numText(t string, integer bool) bool {
	_, ip, dot, fp := numPrefix(t)
	if dot && (integer || ip == "") || strings.Contains(fp, ".") || strings.Contains(fp, "-") || strings.Contains(ip, "-") {
		return false
	}
	if len(ip) > 1 && ip[0] == '0' {
		return false
	}
	for _, c := range ip + fp {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
