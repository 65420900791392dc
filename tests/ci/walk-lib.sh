# Sourced by the recipes of tests/ci/walk-examples: the runner's part of a
# walk, in the VM (WALK_* as walk-examples sets them).

# walk_github WORKFLOW ARTIFACTS [walk.py options...]: WORKFLOW of the
# current folder (the project) walked as the unprivileged user `runner`
# with passwordless sudo (a hosted runner's), the action used from the copy
# of memrun's repository, memrun's release from the mirror.
walk_github() {
  local workflow=$1 artifacts=$2
  shift 2
  runuser -u runner -- env -i PATH="$WALK_SRC/tests/ci/bin:/usr/local/bin:/usr/bin:/bin" HOME=/home/runner \
    USER=runner LANG=C.UTF-8 WALK_RUNS="${WALK_RUNS:-$WALK_SCRATCH/runs}" MEMRUN_RELEASES="$WALK_RELEASES" \
    python3 "$WALK_SRC/tests/ci/walk.py" "$workflow" --workspace "$PWD" --artifacts "$artifacts" \
    --action-repo OWNER/memrun="$WALK_SCRATCH/memrun" "$@"
}

# walk_gitlab PIPELINE ARTIFACTS: a .gitlab-ci.yml of the current folder,
# as root (a job in GitLab's container), memrun's release from the mirror.
walk_gitlab() {
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    python3 "$WALK_SRC/tests/ci/walk.py" --gitlab "$1" --workspace "$PWD" --artifacts "$2" \
    --variable MEMRUN_RELEASES="$WALK_RELEASES"
}

# A memrun already installed would hide a template's install step.
uninstall_memrun() {
  rm -f /usr/local/bin/memrun
}
