# Sourced by checksum-cost.sh and durability-cost.sh: postmark-raif's workload for
# fsprof-postmark, and the median with its range.

# Writes postmark-raif's configuration (6,000 files of 512 B-10 KiB, 60,000 transactions, 60
# subdirectories, 4 KiB unbuffered I/O, seed 42) to $1, with MNT where the location goes.
raif_postmark_config() {
    cat > "$1" <<'PM'
set size 512 10240
set number 6000
set seed 42
set transactions 60000
set subdirectories 60
set read 4096
set write 4096
set buffering false
set bias read 5
set bias create 5
set location MNT
run
quit
PM
}

# Reads numbers separated by spaces; prints "MEDIAN [MIN-MAX]".
med() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f [%.2f-%.2f]", m, a[1], a[NR]}'; }
