# busbw.gp: bus bandwidth against message size from `rehearsal collective ... --out DIR`, out of
# place (column 8) and in place (column 12), as nccl-tests prints them.  `rehearsal plot DIR`
# draws the same, with the algorithms and the line rate; this script is for tables side by side.
# Usage: gnuplot -e "in='DIR/collective.txt'; out='busbw.png'" plots/busbw.gp
# Several tables at once: in='a.txt b.txt' (two lines each, titled by file name).
if (!exists("in")) in = 'out/collective.txt'
if (!exists("out")) out = 'busbw.png'
set terminal pngcairo size 1000,600 noenhanced
set output out
set title 'Bus bandwidth by message size (nccl-tests definition)'
set xlabel 'message size'
set ylabel 'busbw (GB/s)'
set logscale x 2
set format x '%.0b %BB'
set grid
set key top left
plot for [f in in] f using 1:8 with linespoints title f.' out-of-place', \
     for [f in in] f using 1:12 with lines lw 2 dt 2 title f.' in-place'
