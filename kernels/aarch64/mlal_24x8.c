/* Seed 004's 24x8 VMLAL micro-kernel, signed (the 4.6-bit scheme, flush 258) and unsigned (4-bit u4, flush 145). */

#define NAME(x) lowp_mlal_s8_24x8_##x
#define ELEM int8_t
#define VEC16 int8x16_t
#define VEC8 int8x8_t
#define ACC16 int16x8_t
#define LD16 vld1q_s8
#define DUP_LANEQ vdup_laneq_s8
#define MLAL vmlal_s8
#define GET_LO vget_low_s8
#define GET_HI vget_high_s8
#define ZERO16() vdupq_n_s16(0)
#define LD32(p) vld1q_s32(p)
#define ST32(p, x) vst1q_s32(p, x)
#define WIDEN_ADD_LO(acc, x) vaddw_s16(acc, vget_low_s16(x))
#define WIDEN_ADD_HI(acc, x) vaddw_high_s16(acc, x)
#include "mlal_24x8.h"
#undef NAME
#undef ELEM
#undef VEC16
#undef VEC8
#undef ACC16
#undef LD16
#undef DUP_LANEQ
#undef MLAL
#undef GET_LO
#undef GET_HI
#undef ZERO16
#undef LD32
#undef ST32
#undef WIDEN_ADD_LO
#undef WIDEN_ADD_HI

/* Unsigned: UMLAL into uint16 lanes, UADDW into the int32 tile (read as uint32: the sum is the same bits). */
#define NAME(x) lowp_mlal_u8_24x8_##x
#define ELEM uint8_t
#define VEC16 uint8x16_t
#define VEC8 uint8x8_t
#define ACC16 uint16x8_t
#define LD16 vld1q_u8
#define DUP_LANEQ vdup_laneq_u8
#define MLAL vmlal_u8
#define GET_LO vget_low_u8
#define GET_HI vget_high_u8
#define ZERO16() vdupq_n_u16(0)
#define LD32(p) vld1q_u32((const uint32_t *)(p))
#define ST32(p, x) vst1q_u32((uint32_t *)(p), x)
#define WIDEN_ADD_LO(acc, x) vaddw_u16(acc, vget_low_u16(x))
#define WIDEN_ADD_HI(acc, x) vaddw_high_u16(acc, x)
#include "mlal_24x8.h"
