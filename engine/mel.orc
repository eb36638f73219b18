# ORC kernels of the log-mel front end (engine/mel.c).
# mel-orc-dist.c / mel-orc-dist.h are the checked-in orcc outputs used when
# ORC is disabled; regenerate them after editing this file:
#   orcc --implementation -o engine/mel-orc-dist.c engine/mel.orc
#   orcc --header -o engine/mel-orc-dist.h engine/mel.orc

# d = s * w: one frame of audio times the Hann window
.function wk_orc_mel_window
.dest 4 d1 float
.source 4 s1 float
.source 4 s2 float
mulf d1, s1, s2

# d = re * re + im * im over interleaved complex FFT bins
.function wk_orc_mel_power
.dest 4 d1 float
.source 8 s1
.temp 4 re
.temp 4 im
splitql im, re, s1
mulf re, re, re
mulf im, im, im
addf d1, re, im

# d = s * p: first non-zero filter weight of a mel row, over frames
.function wk_orc_mel_scale
.dest 4 d1 float
.source 4 s1 float
.floatparam 4 p1
mulf d1, s1, p1

# d += s * p: further filter weights of a mel row, over frames
.function wk_orc_mel_madd
.dest 4 d1 float
.source 4 s1 float
.floatparam 4 p1
.temp 4 t
mulf t, s1, p1
addf d1, d1, t

# d = (max (d, floor) + add) * mul: Whisper's clamp to max-8, then (x+4)/4
.function wk_orc_mel_norm
.dest 4 d1 float
.floatparam 4 p1
.floatparam 4 p2
.floatparam 4 p3
.temp 4 t
maxf t, d1, p1
addf t, t, p2
mulf d1, t, p3
