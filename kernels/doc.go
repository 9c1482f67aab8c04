// Package kernels holds k3's numeric kernels: mat-vec and mat-mat for f32,
// bf16 and MXFP4 weights, norms and activations, and a deterministic
// parallel pool. It imports nothing of the project.
//
// # Floating-point contract
//
// Activations are float32. Every dot product y = Σ w_i·x_i is formed in
// float64 in a fixed, lane-partitioned order so that the portable Go code,
// any SIMD path and any thread count give bit-identical results:
//
//   - There are 8 logical float64 lanes. Element i goes to lane i mod 8, and
//     each lane accumulates its elements in ascending i, starting from +0:
//     lane[l] = lane[l] + float64(w_i)*float64(x_i).
//   - Every weight value (f32, bf16 widened by a 16-bit shift, or an MXFP4
//     E2M1 code times its E8M0 scale 2^(s-127)) times a float32 activation is
//     exact in float64 (at most 48 significant bits), so a fused multiply-add
//     and a multiply-then-add agree bit for bit: SIMD code may use FMA freely.
//   - The lanes are combined by a fixed tree:
//     ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)),
//     which is what one 512-bit register (or two 256-bit ones added lane-wise)
//     reduces to by halving. The result is rounded once to float32.
//   - Because the lanes start at +0 and round-to-nearest never produces -0 from
//     a sum that is not exactly -0+-0, padding a tail with zero products never
//     changes a lane: tails need no special order.
//   - An MXFP4 group whose E8M0 scale is 255 (NaN by the OCP spec) contributes
//     nothing, as in the C engine; callers count such groups when they load
//     an expert (CountNaNScales).
//
// Parallel kernels split OUTPUT rows among workers and never split a
// reduction, so results do not depend on the number of threads.
//
// Elementwise float32 arithmetic outside dot products is written with explicit
// float32 conversions around every product (float32(a*b) + c), which the Go
// specification forbids the compiler to fuse. Transcendental functions are
// evaluated in float64 with the math package and rounded once to float32.
package kernels
