# Reading the JSON of vbagg-eval from the experiment scripts (sourced, not run).
# The entries of a list field: list FILE KEY
list() { grep -o "\"$2\": \[[^]]*" "$1" | head -1 | sed 's/.*\[//'; }
# The mean of comma-separated numbers on stdin, and the k-th of them.
mean_of() { awk -F', ' '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%.3f", s / NF }'; }
nth() { awk -F', ' -v k="$1" '{ printf "%.2f", $k }'; }
# A field of the "pixel" map (pixel FILE KEY), and the first field of a name anywhere (top FILE KEY).
pixel() { grep -o "\"pixel\": {[^}]*" "$1" | grep -o "\"$2\": [^,]*" | head -1 | sed 's/.*: //'; }
top() { grep -o "\"$2\": [^,]*" "$1" | head -1 | sed 's/.*: //'; }
