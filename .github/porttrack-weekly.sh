#!/usr/bin/env bash
# The steps of .github/workflows/porttrack-weekly.yml that are not porttrack itself, in one file
# that the workflow runs and tests/report/test_weekly_ci.py runs too, so the test exercises what CI runs.
#
#   restore           in the workspace checkout: bring back what the last run kept on the state
#                     branch (state/upstream.json, state/reports.json, reports/), unless the copy
#                     committed on the checked-out branch is newer (a person ran porttrack and
#                     committed its state: their record wins)
#   fork-repo         print `repo=` and `branch=` of the fork from tracks.yaml (for $GITHUB_OUTPUT)
#   fork-remote DIR   give the fork checkout in DIR the `upstream` remote porttrack fetches PR heads from
#   save DIR          make DIR's state/ and reports/ files the next commit of the state branch and
#                     push it; the branch holds nothing else, and the commit is built in a temporary
#                     index, so no checkout or work tree is touched
#
# PORTTRACK_STATE_BRANCH names the branch (default porttrack-state).
set -euo pipefail

STATE_BRANCH=${PORTTRACK_STATE_BRANCH:-porttrack-state}
KEPT_FILES=(state/upstream.json state/reports.json)
KEPT_DIR=reports

# 0: the state branch exists on origin; 2: it does not (yet); anything else: fail.
state_branch_exists() {
    local rc=0
    git ls-remote --exit-code origin "refs/heads/$STATE_BRANCH" >/dev/null || rc=$?
    [ "$rc" -eq 0 ] && return 0
    [ "$rc" -eq 2 ] && return 1
    echo "porttrack-weekly: cannot read origin's branches (git ls-remote exit $rc)" >&2
    exit "$rc"
}

fetch_state_branch() {
    git fetch --quiet --no-tags --depth=1 origin "+refs/heads/$STATE_BRANCH:refs/porttrack/state"
}

# Exit 0 when the record in $1 is at least as new as the one in $2 (a missing or unreadable file
# is oldest): upstream.json by its observed_at, reports.json by its newest run. Stamps are UTC
# `...Z`, so string order is time order.
at_least_as_new() {
    python - "$1" "$2" <<'PY'
import json, sys

def moment(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):  # unreadable, malformed, or nested past json's limit
        return ""
    if not isinstance(data, dict):
        return ""
    if isinstance(data.get("reports"), list):
        return max((str(r.get("generated_at") or "") for r in data["reports"] if isinstance(r, dict)), default="")
    return str(data.get("observed_at") or "")

sys.exit(0 if moment(sys.argv[1]) >= moment(sys.argv[2]) else 1)
PY
}

restore() {
    if ! state_branch_exists; then
        echo "no $STATE_BRANCH branch yet: this run starts from the state committed on the checked-out branch"
        return 0
    fi
    fetch_state_branch
    local path kept
    kept=$(mktemp)
    for path in "${KEPT_FILES[@]}"; do
        git cat-file -e "refs/porttrack/state:$path" 2>/dev/null || continue
        git show "refs/porttrack/state:$path" >"$kept"
        if at_least_as_new "$kept" "$path"; then
            mkdir -p "$(dirname "$path")"
            cp "$kept" "$path"
            echo "restored $path from $STATE_BRANCH"
        else
            echo "kept the committed $path: it is newer than $STATE_BRANCH's"
        fi
    done
    rm -f "$kept"
    if git cat-file -e "refs/porttrack/state:$KEPT_DIR" 2>/dev/null; then
        git archive "refs/porttrack/state" "$KEPT_DIR" | tar -x
        echo "restored $KEPT_DIR/ from $STATE_BRANCH"
    fi
}

tracks_field() {
    python -c 'import sys, yaml; doc = yaml.safe_load(open("tracks.yaml", encoding="utf-8")); print(doc[sys.argv[1]][sys.argv[2]])' "$1" "$2"
}

fork_repo() {
    echo "repo=$(tracks_field fork repo)"
    echo "branch=$(tracks_field fork branch)"
}

fork_remote() {
    local dir=$1 server=${GITHUB_SERVER_URL:-https://github.com}
    local url="$server/$(tracks_field upstream repo).git"
    if git -C "$dir" remote get-url upstream >/dev/null 2>&1; then
        git -C "$dir" remote set-url upstream "$url"
    else
        git -C "$dir" remote add upstream "$url"
    fi
    echo "fork checkout $dir: remote upstream is $url"
}

save() {
    local src=$1 parent="" index tree commit file blob
    : "${GIT_AUTHOR_NAME:=github-actions[bot]}" "${GIT_AUTHOR_EMAIL:=41898282+github-actions[bot]@users.noreply.github.com}"
    : "${GIT_COMMITTER_NAME:=$GIT_AUTHOR_NAME}" "${GIT_COMMITTER_EMAIL:=$GIT_AUTHOR_EMAIL}"
    export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL
    index=$(mktemp)
    rm -f "$index"
    if state_branch_exists; then
        fetch_state_branch
        parent=$(git rev-parse refs/porttrack/state)
        GIT_INDEX_FILE=$index git read-tree "$parent"
    else
        GIT_INDEX_FILE=$index git read-tree --empty
    fi
    # -f: this checkout's HEAD is main, which may have its own state/ committed; without it git
    # refuses to drop an index entry that differs from both HEAD and the work tree, and from the
    # second week on (the state branch now differs from main) every save failed.
    GIT_INDEX_FILE=$index git rm -r -q -f --cached --ignore-unmatch -- state "$KEPT_DIR"
    while IFS= read -r -d '' file; do
        blob=$(git hash-object -w -- "$src/$file")
        GIT_INDEX_FILE=$index git update-index --add --cacheinfo "100644,$blob,$file"
    done < <(cd "$src" && find state "$KEPT_DIR" -type f -print0 2>/dev/null)
    tree=$(GIT_INDEX_FILE=$index git write-tree)
    rm -f "$index"
    if [ -n "$parent" ] && [ "$tree" = "$(git rev-parse "$parent^{tree}")" ]; then
        echo "$STATE_BRANCH is unchanged"
        return 0
    fi
    commit=$(git commit-tree "$tree" ${parent:+-p "$parent"} -m "porttrack weekly state, $(date -u +%Y-%m-%dT%H:%M:%SZ)")
    git push --quiet origin "$commit:refs/heads/$STATE_BRANCH"
    echo "kept porttrack's state on $STATE_BRANCH at ${commit:0:12}"
}

case "${1:-}" in
    restore) restore ;;
    fork-repo) fork_repo ;;
    fork-remote) fork_remote "${2:?fork-remote needs the folder of the fork checkout}" ;;
    save) save "${2:?save needs the folder holding state/ and reports/}" ;;
    *) echo "usage: $0 restore | fork-repo | fork-remote DIR | save DIR" >&2; exit 2 ;;
esac
