#!/usr/bin/env bash
# Apply a packet's fix.patch to an installed torch without touching it, then run the packet's
# repro scripts (under torchrun, 2 ranks) and its test against the patched torch.
#
#   docs/findings/upstream/verify_patch.sh PACKET_DIR PYTHON [--unpatched]
#
# PYTHON is the interpreter of a venv with torch installed (its torchrun is used beside it).
# The patched torch is a scratch tree of symlinks into that torch (in a temporary directory,
# removed at exit), in which only the files the patch touches are real copies; it goes first on
# PYTHONPATH. The installed files' checksums are compared before and after.
# --unpatched runs the same commands on the installed torch, for the "fails without" half.
# The test needs expecttest (a torch test dependency): put it on PYTHONPATH if the venv lacks it.
# Exit status: 0 when every command exited 0 and the installed torch is unchanged, else 1.
set -u

packet=$(cd "${1:?usage: verify_patch.sh PACKET_DIR PYTHON [--unpatched]}" && pwd)
python=${2:?usage: verify_patch.sh PACKET_DIR PYTHON [--unpatched]}
mode=${3:-patched}
torchrun="$(dirname "$python")/torchrun"
site=$("$python" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))") || exit 1
touched=$(sed -n 's|^+++ b/||p' "$packet/fix.patch")
checksums() { (cd "$site" && sha256sum $touched); }
before=$(checksums)

if [ "$mode" != "--unpatched" ]; then
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/torch-patched.XXXXXX")
    trap 'rm -rf "$scratch"' EXIT
    cp -rs "$site/torch" "$scratch/torch"
    for f in $touched; do  # a real copy, so that patching it leaves the installed file alone
        cp --remove-destination "$site/$f" "$scratch/$f"
    done
    (cd "$scratch" && patch -p1 --forward --no-backup-if-mismatch < "$packet/fix.patch") || exit 1
    export PYTHONPATH="$scratch${PYTHONPATH:+:$PYTHONPATH}"
fi
"$python" -c "import torch; print('torch', torch.__version__, 'from', torch.__file__)"

status=0
run() {
    echo "+ $*"
    "$@"
    local rc=$?
    echo "exit=$rc  ($(basename "${@: -1}"))"
    [ $rc -eq 0 ] || status=1
}
cd "$packet"
for script in repro.py sibling_*.py; do
    [ -f "$script" ] && run timeout 300 "$torchrun" --standalone --nproc-per-node 2 "$script"
done
if "$python" -c "import expecttest" 2>/dev/null; then
    for test in test_*.py; do
        [ -f "$test" ] && run timeout 900 "$python" "$test"
    done
else
    echo "the tests need expecttest (a torch test dependency), which $python cannot import:"
    echo "  pip install --target DIR expecttest, then PYTHONPATH=DIR ${BASH_SOURCE[0]} $packet $python ${3:-}"
    status=1
fi

if [ "$(checksums)" != "$before" ]; then
    echo "the installed torch changed: $touched"
    status=1
else
    echo "installed torch unchanged (sha256 of $touched)"
fi
exit $status
