/*
** dtype_convert.h -- IEEE 16-bit float conversions and rounding to a dtype,
** written out bit by bit (no compiler _Float16 needed). Internal: the
** runtime rounds scalar arguments with them; the test support's CPU
** reference (src/support/reference.h) stores through them.
*/
#ifndef COLLGEN_DTYPE_CONVERT_H
#define COLLGEN_DTYPE_CONVERT_H
#include <stdint.h>

#include "collgen.h"

/* Round-to-nearest-even conversions (NaN stays NaN, overflow -> inf). */
uint16_t collgen__f32_to_bf16(float f);
float collgen__bf16_to_f32(uint16_t h);
uint16_t collgen__f32_to_f16(float f);
float collgen__f16_to_f32(uint16_t h);

/* float8 e4m3 (OCP E4M3FN: bias 7, no infinities, max 448), as PTX
** cvt.rn.satfinite.e4m3x2.f32 converts: round to nearest even, magnitudes
** past 448 (infinities too) saturate to +-448, NaN stays NaN (0x7f/0xff). */
uint8_t collgen__f32_to_e4m3_sat(float f);
float collgen__e4m3_to_f32(uint8_t q);

/* Rounds f to `dtype` and back: the value a scalar of that dtype really
** holds. An unknown dtype gives NaN (callers validate dtypes first). */
float collgen__dtype_round(collgen_dtype_t dtype, float f);
#endif
