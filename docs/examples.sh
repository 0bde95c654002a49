#!/bin/bash
# Produces every terminal output pasted into docs/en/guide.md and docs/zh/guide.md: a scratch git repo with a
# fake trainer, a fake nvidia-smi replaying a real capture (tests/fixtures/nvidia), then every command.
# Each block lands in $D/out/<name>.txt ("$ command", its stdout+stderr, "[exit code N]" when not 0).
# Needs git, jq, and root for `unshare` (a second "node" under another hostname). Run it in a PID namespace so
# Ray clusters of other users of the machine stay out of the output:
#   sudo unshare -pf --mount-proc docs/examples.sh [DIR]        (DIR default /tmp/rrdemo/w, wiped first)
# The replays of examples/determinism.py need torch: PYTHON_ML=/path/to/venv/bin/python (its packages are used
# from a venv of its own, $DIR/venv, so the pasted paths stay neutral); without it those two blocks are skipped.
set -u
WT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
D=${1:-/tmp/rrdemo/w}
if [ -e "$D" ] && [ ! -d "$D/out" ]; then echo "examples.sh: $D exists and is not an earlier output; not wiping it" >&2; exit 2; fi
rm -rf "$D"; mkdir -p "$D"/{bin,fx,proj,runs,out,data/shards}
"$WT/zipapp.sh" "$D/relaxrepro.pyz" >/dev/null
cp $WT/tests/fixtures/nvidia/xml/telegraf__dual_a5000-v13.xml "$D/fx/q.xml"
cp $WT/tests/fixtures/nvidia/topo/club-3090-issue1229__2xRTX5090_PHB_tabs.txt "$D/fx/topo.txt"
cat > "$D/bin/nvidia-smi" <<SMI
#!/bin/sh
case "\$*" in
  "-q -x") cat $D/fx/q.xml ;;
  "topo -m") cat $D/fx/topo.txt ;;
  --query-gpu=*) echo 'Field "compute_cap" is not a valid field to query.'; exit 2 ;;
  *) exit 2 ;;
esac
SMI
chmod +x "$D/bin/nvidia-smi"
cat > "$D/bin/relaxrepro" <<RR
#!/bin/sh
exec python3 $D/relaxrepro.pyz "\$@"
RR
chmod +x "$D/bin/relaxrepro"
export PATH="$D/bin:/usr/local/bin:/usr/bin:/bin"
export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=WARN WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567
export PS4= XDG_CACHE_HOME=$D/xdg
cd "$D/proj"
git init -q -b main . && git config user.email dev@example.com && git config user.name Dev
git remote add origin https://github.com/example/tiny-llm.git
cat > train.py <<'PY'
"""A fake trainer: parses its arguments, 'trains', writes a checkpoint."""
import argparse, json, os, sys

p = argparse.ArgumentParser()
p.add_argument("--config", default="config.json")
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--data-path", default="../data")
p.add_argument("--micro-batch-size", type=int, default=8)
p.add_argument("--global-batch-size", type=int, default=64)
p.add_argument("--log-dir", default="../runs")
p.add_argument("--load", default=None)
p.add_argument("--steps", type=int, default=3)
p.add_argument("--fail", action="store_true")
a = p.parse_args()
loss = 1.0
for _ in range(a.steps):
    loss *= 1.0 - a.lr
if a.fail:
    sys.exit("loss diverged")
os.makedirs(os.path.join(a.log_dir, "ckpt"), exist_ok=True)
with open(os.path.join(a.log_dir, "ckpt", "model.txt"), "w") as fh:
    fh.write("%f\n" % loss)
print("final loss %.4f" % loss)
PY
echo '{"model": "tiny-llm", "hidden": 256, "layers": 4, "micro_batch_size": 8, "global_batch_size": 64}' > config.json
git add . && git commit -qm "tiny trainer"
head -c 4096 /dev/urandom > ../data/shards/00.bin; head -c 4096 /dev/urandom > ../data/shards/01.bin
echo "tokenizer v2" > ../data/vocab.txt

show() { # show NAME CMD...: the command and its output (stdout and stderr), exit code if not 0
  local name=$1; shift
  { echo "\$ $*"; bash -c "$*" 2>&1; rc=$?; [ $rc -ne 0 ] && echo "[exit code $rc]"; } > "$D/out/$name.txt"
}
show version 'relaxrepro --version'
show help 'relaxrepro --help'
show fingerprint 'relaxrepro fingerprint ../data'
show gen1 'relaxrepro generate --output-dir ../runs -- python3 train.py --lr 3e-4 --config config.json --seed 42 --data-path ../data --micro-batch-size 8 --global-batch-size 64'
M1=$(ls ../runs/manifest_*.json | head -1); echo "$M1" > "$D/out/M1"
sed -i 's/hidden": 256/hidden": 512/' config.json
echo "# try a larger model" >> train.py
show gen2 'relaxrepro generate --output-dir ../runs --group width --note "wider model" --parent '"$(basename $M1 .json | sed s/manifest_//)"' -- python3 train.py --lr 3e-4 --config config.json --seed 42 --data-path ../data --micro-batch-size 8 --global-batch-size 64 --hf-token $HF_TOKEN'
M2=$(ls -t ../runs/manifest_*.json | head -1); echo "$M2" > "$D/out/M2"
show run_ok 'relaxrepro run --output-dir ../runs --group width -- python3 train.py --lr 1e-3 --seed 1 --log-dir ../runs/a'
show run_fail 'relaxrepro run --output-dir ../runs --group width -- python3 train.py --lr 3e-3 --seed 2 --fail'
show run_127 'relaxrepro run --output-dir ../runs -- pyhton3 train.py'
show ls 'relaxrepro ls ../runs'
show lineage 'relaxrepro lineage '"$(basename $M2 .json | sed s/manifest_//)"' ../runs'
show compare 'relaxrepro compare --group width ../runs'
show diff 'relaxrepro diff '"../runs/$(basename $M1) ../runs/$(basename $M2)"
show check 'relaxrepro check '"../runs/$(basename $M2)"
git stash -q
show check_clean 'relaxrepro check '"../runs/$(basename $M2)"
git stash pop -q
show rerun 'relaxrepro rerun --dry-run '"../runs/$(basename $M2)"
show rerun_confirm 'relaxrepro rerun --confirm '"../runs/$(basename $M2)"
mkdir -p ../runs/slurm
show slurm 'SLURM_JOB_ID=4242 SLURM_JOB_NAME=llm-sft SLURM_JOB_PARTITION=h100 SLURM_JOB_NODELIST="gpu-node-[01-04]" SLURM_NNODES=4 SLURM_NTASKS=4 SLURM_NTASKS_PER_NODE=1 SLURM_GPUS_PER_NODE=8 SLURM_PROCID=0 relaxrepro generate --output-dir ../runs/slurm && jq "{scheduler, rank: .runtime.rank}" ../runs/slurm/manifest_*.json'
show restore 'relaxrepro restore '"../runs/$(basename $M2)"' --into ../restored && git -C ../restored/proj status --short'
mkdir -p ../runs/job4242 ../runs/hang ../runs/stale ../runs/big
cp $WT/tests/fixtures/nvidia/xml/telegraf__dual_2080-v13.xml "$D/fx/q2.xml"
show node 'export RELAXREPRO_RUN_ID=job4242; relaxrepro generate --output-dir ../runs/job4242 && relaxrepro generate --node-report --output-dir ../runs/job4242 && unshare -u sh -c "hostname gpu-node-02; sed -i s/q.xml/q2.xml/ ../bin/nvidia-smi; relaxrepro generate --node-report --output-dir ../runs/job4242; sed -i s/q2.xml/q.xml/ ../bin/nvidia-smi" && ls ../runs/job4242'
show merge 'relaxrepro merge ../runs/job4242/manifest_job4242.json ../runs/job4242/'
show merged_jq 'jq -c ".heterogeneity.fields[] | {field, counts}" ../runs/job4242/manifest_job4242.merged.json'
show stale_ray 'RAY_ADDRESS=127.0.0.1:6390 relaxrepro generate --output-dir ../runs/stale'
show stale_ray_jq 'jq -c ".collection.probes.ray, .runtime" ../runs/stale/manifest_*.json'
show strict_hang 'printf "#!/bin/sh\nsleep 60\n" > ../bin/nvidia-smi && time relaxrepro generate --strict --output-dir ../runs/hang'
show strict_jq 'jq -c .collection.probes.gpu ../runs/hang/manifest_*.json'
cp "$D/fx/q.xml" "$D/fx/keep.xml"; cat > "$D/bin/nvidia-smi" <<SMI
#!/bin/sh
case "\$*" in
  "-q -x") cat $D/fx/q.xml ;;
  "topo -m") cat $D/fx/topo.txt ;;
  --query-gpu=*) echo 'Field "compute_cap" is not a valid field to query.'; exit 2 ;;
  *) exit 2 ;;
esac
SMI
git stash -q; python3 -c "print('\\n'.join('row %d %s' % (i, 'x' * 40) for i in range(3000)))" > table.txt; git add table.txt; git commit -qm table; sed -i 's/x/y/g' table.txt
show big 'relaxrepro generate --output-dir ../runs/big && wc -c ../runs/big/* && jq -c ".collection.truncated, .code.proj.patch" ../runs/big/manifest_*.json | cut -c1-400'
git checkout -q table.txt; git stash pop -q
show jq_hw 'jq .hardware '"$M2"
show jq_env 'jq .environment '"$M2"
show jq_cfg 'jq "{command, config, seeds, data, training}" '"$M2"
show jq_code 'jq .code '"$M2"
show jq_coll 'jq -c ".collection.probes | to_entries[] | {probe: .key, status: .value.status, seconds: .value.seconds}" '"$M2"
show jq_coll2 'jq "del(.collection.probes) | .collection" '"$M2"
show jq_lin 'jq "{lineage, container, runtime}" '"$M2"
show jq_outcome 'jq .outcome '"$(ls ../runs/manifest_*.json | sed -n 4p)"
export RELAXREPRO_CACHE_DIR=$D/cache
show pyzcache 'python3 ../relaxrepro.pyz --version && find ../cache -maxdepth 2 && RELAXREPRO_NO_CACHE=1 python3 ../relaxrepro.pyz --version'
unset RELAXREPRO_CACHE_DIR
cat > train_api.py <<'PY'
import argparse, logging
import relaxrepro

logging.basicConfig(format="%(name)s: %(levelname)s: %(message)s")
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, default=1e-3)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--log-dir", default="../runs/api")
args = p.parse_args()

with relaxrepro.recorded(args, output_dir=args.log_dir, group="api-demo") as manifest:
    # ray.init(); relaxrepro.update_manifest(manifest)
    print("training with lr", args.lr, "- manifest", manifest.path if manifest else None)
PY
show api 'PYTHONPATH=../relaxrepro.pyz python3 train_api.py --lr 0.01 --seed 7 && jq -c "{run_id, resolved: .config.resolved_args, source: .config.resolved_args_source, lineage, outcome}" ../runs/api/manifest_*.json'
show runapi 'PYTHONPATH=../relaxrepro.pyz relaxrepro run --output-dir ../runs/wrapped --note "run + API" -- python3 train_api.py --lr 0.02 --log-dir ../runs/api2; ls ../runs/wrapped; jq -c "{run_id, argv: .command.argv, resolved: .config.resolved_args, lineage, api_probes: (.collection.api.probes | length), outcome}" ../runs/wrapped/manifest_*.json'
echo '{"git_commit": "cfef71288ec6e797aefb3b0e388a20bee888103b", "has_uncommitted_changes": false, "python_version": "3.10.12", "hyperparams": {"lr": 0.001}, "seed": 42, "metrics": {"loss": 1.93}}' > ../runs/old_tracker.json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['schema_version']='1.7'; d['energy']={'kwh': 3.2}; json.dump(d,open('../runs/newer_minor.json','w'))" "$M1"
show legacy_src 'cat ../runs/old_tracker.json; jq -c "{schema_version, energy}" ../runs/newer_minor.json'
show legacy 'relaxrepro diff ../runs/old_tracker.json '"$M1"' | tail -4; relaxrepro diff --json ../runs/newer_minor.json '"$M1"' | head -c 600'
show badrunid 'relaxrepro generate --run-id "../x"'
show v2 'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d[\"schema_version\"]=\"2.0\"; json.dump(d,open(\"../runs/future.json\",\"w\"))" '"$M1"' && relaxrepro check ../runs/future.json; relaxrepro diff ../runs/future.json '"$M1"

# -- results, verify, replays (docs: verify, compare's reproducibility, rerun --quick/--full). A second project:
# a tiny pure-Python trainer that traces its loss, then examples/determinism.py, which needs torch: set
# PYTHON_ML to an interpreter that has it (the blocks from it are skipped otherwise).
mkdir -p "$D/vproj" && cd "$D/vproj"
git init -q -b main . && git config user.email dev@example.com && git config user.name Dev
cat > train.py <<'PY'
"""A tiny trainer that records its results: the loss every step, val_loss, a checkpoint in its log dir."""
import argparse, os, random
import relaxrepro

p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--steps", type=int, default=200)
p.add_argument("--log-dir", default="runs/demo")
args = p.parse_args()
rng = random.Random(args.seed)
metrics = {}
ckpt = os.path.join(args.log_dir, "ckpt")
with relaxrepro.recorded(args, output_dir=args.log_dir, metrics=metrics, outputs=[ckpt]):
    w = 3.0
    for step in range(args.steps):
        x = rng.gauss(0.0, 1.0)
        loss = (w * x) ** 2 + 1e-3 * rng.random()
        w -= 0.05 * 2 * w * x * x
        relaxrepro.trace(step, loss=loss)
    metrics["val_loss"] = w * w + 1e-3 * rng.random()
    os.makedirs(ckpt, exist_ok=True)
    with open(os.path.join(ckpt, "w.txt"), "w") as fh:
        fh.write("%.12f\n" % w)
PY
git add train.py && git commit -qm "tiny trainer with results"
unset HF_TOKEN WANDB_API_KEY  # a replay is refused while a recorded secret is not supplied again (--set)
export PYTHONPATH=$D/relaxrepro.pyz
for r in a:1 b:2 c:1 d:3; do
  relaxrepro run --output-dir runs/${r%:*} --group demo -- python3 train.py --seed ${r#*:} --log-dir runs/${r%:*} >/dev/null 2>&1
done
VA=$(ls runs/a/manifest_*.json); VB=$(ls runs/b/manifest_*.json); VC=$(ls runs/c/manifest_*.json)
show results_jq "jq -c '.results | {metrics, outputs, trace: (.trace | {calls, every, last_step, names, steps: .steps[48:53]})}' $VA"
show verify_same "relaxrepro verify $VA $VC"
show verify_diff "relaxrepro verify $VA $VB"
show rerun_id "relaxrepro rerun $(basename $VA .json | sed s/manifest_//) --confirm --full"
show compare_demo 'relaxrepro compare --group demo runs | tail -6'
if ${PYTHON_ML:-false} -c "import torch" 2>/dev/null; then
  # A venv of its own that sees PYTHON_ML's packages (torch, numpy) but not an editable relaxrepro there
  "$($PYTHON_ML -c 'import sys; print(sys._base_executable)')" -m venv --without-pip "$D/venv"
  $PYTHON_ML -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    > "$("$D/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ml.pth"
  mkdir -p "$D/dproj" && cd "$D/dproj"
  git init -q -b main . && git config user.email dev@example.com && git config user.name Dev
  cp "$WT/examples/determinism.py" . && echo runs/ > .gitignore
  git add determinism.py .gitignore && git commit -qm "determinism example"
  PATH="$D/venv/bin:$PATH"
  relaxrepro run --output-dir runs/det -- python determinism.py --mode deterministic >/dev/null 2>&1
  relaxrepro run --output-dir runs/seed -- python determinism.py --mode seed >/dev/null 2>&1
  show rerun_quick "relaxrepro rerun $(ls runs/det/manifest_*.json) --confirm --quick 5"
  show rerun_full "relaxrepro rerun $(ls runs/seed/manifest_*.json) --confirm --full"
fi
