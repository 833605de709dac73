# epochs.gp: time per epoch split into compute and waiting for gradients, from the per-epoch table
# that `rehearsal run` prints.
# Usage: rehearsal run FILE > run.txt; gnuplot -e "in='run.txt'; out='epochs.png'" plots/epochs.gp
if (!exists("in")) in = 'run.txt'
if (!exists("out")) out = 'epochs.png'
set terminal pngcairo size 900,560 noenhanced
set output out
set title 'Simulated time per epoch'
set xlabel 'epoch'
set ylabel 'seconds'
set datafile missing '-'
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set key outside right top
# the table ends at the first blank line; the summary below it is not data
data = '< sed "/^$/q" '.in
plot data using 4:xtic(1) title 'compute', '' using 5 title 'waiting for gradients'
