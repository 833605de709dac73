# busbw.gp: bus bandwidth against message size from `rehearsal collective ... --out DIR`.
# Usage: gnuplot -e "in='DIR/collective.txt'; out='busbw.png'" plots/busbw.gp
# Several tables at once: in='a.txt b.txt' (one line each, titled by file name).
if (!exists("in")) in = 'out/collective.txt'
if (!exists("out")) out = 'busbw.png'
set terminal pngcairo size 900,560 noenhanced
set output out
set title 'Bus bandwidth by message size (nccl-tests definition)'
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set logscale x 2
set format x '%.0b %BB'
set grid
set key top left
plot for [f in in] f using 1:8 with linespoints title f
