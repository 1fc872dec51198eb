// Hot CPU loops are compiled twice, for x86-64-v3 (AVX2 + FMA) and for the
// baseline, and the loader picks one at start-up (GCC target_clones): fast
// on current CPUs, still correct on old ones.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ACTORPS_SIMD __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ACTORPS_SIMD
#endif
