#!/usr/bin/env bash
# per-set alpha/beta grid (lambda 1) for AE-CM d-2K-d on the UCI sets (5 runs each, seeds 0-4)
B=${AECM:-target/release/aecm}
D=${DATA_DIR:-../shared/data}
run() { ds=$1; spec=$2; e=$3; extra=$4
  for a in 1.5 3 10 50; do for b in 0.1 1 10; do
    out=${OUT:-/tmp/ucigrid}/$ds-a$a-b$b
    case $spec in sample_data/*) path=$spec ;; *) path=$D/$spec ;; esac
    $B train --data $path --model aecm --hidden none --embed $e --alpha $a --beta $b --batch 32 --epochs 150 --preprocess standardize --runs 5 --eval-every 0 $extra --out $out >/dev/null 2>&1
    python3 -c "
import json;s=json.load(open('$out/summary.json'));a=s['aggregate']
print('$ds', 'alpha $a beta $b', round(100*a['ari']['mean'],1), round(100*a['ari']['std'],1))" 2>/dev/null || echo "$ds alpha $a beta $b FAILED"
  done; done; }
run iris iris/iris_sklearn.csv 6 ""
run breast breast-cancer-wisconsin/wdbc_sklearn.csv 4 ""
run ecoli ecoli/ecoli.csv 16 "--skip-columns 0"
run glass glass/glass.data 12 "--skip-columns 0 --label-column last"
run yeast yeast/yeast.data 20 "--skip-columns 0"
run wine sample_data/wine/wine_data.csv 6 ""   # from the repository root (scikit-learn's copy)
