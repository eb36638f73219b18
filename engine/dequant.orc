# Dequantization of q8_0 / q4_0 blocks (ggml layouts) to f32, one block
# (or any run sharing one scale) per call: y = scale * q.

.function wk_orc_dequant_q8_0
.dest 4 d float
.source 1 s int8_t
.floatparam 4 scale
.temp 2 t16
.temp 4 t32
.temp 4 tf

convsbw t16, s
convswl t32, t16
convlf tf, t32
mulf d, tf, scale

# q4_0: byte i holds element i (low nibble) and element i + 16 (high
# nibble), both offset by 8; lo gets the first, hi the second.
.function wk_orc_dequant_q4_0
.dest 4 lo float
.dest 4 hi float
.source 1 s uint8_t
.floatparam 4 scale
.temp 1 b
.temp 2 t16
.temp 4 t32
.temp 4 tf

andb b, s, 15
subb b, b, 8
convsbw t16, b
convswl t32, t16
convlf tf, t32
mulf lo, tf, scale
shrub b, s, 4
subb b, b, 8
convsbw t16, b
convswl t32, t16
convlf tf, t32
mulf hi, tf, scale
