#!/usr/bin/env bash
# Checks the messages of the commits a change adds (make lint): a subject of at most 72
# characters with no trailing period, and, when there is a body, a blank line between the two.
# Merge commits are left out: git writes their messages.
#
#   hack/commits.sh [BASE]      checks BASE..HEAD
#
# Without BASE (or COMMITS_BASE), the base is the remote's default branch (origin/HEAD, which a
# clone sets), else origin/main; then the commits checked are those not yet in it, and none when
# HEAD is on it. Without either, as in a checkout with no remote, only HEAD is checked. History
# older than this script does not keep these rules and is never checked.
set -euo pipefail

max=72
# Count characters, not bytes, where the locale exists (an arrow is one character).
if locale -a 2>/dev/null | grep -qix 'c\.utf-\?8'; then
	export LC_ALL=C.UTF-8
fi

if ! git rev-parse --verify -q HEAD >/dev/null; then
	echo "commits: no commit to check (not a git checkout, or no commit yet)"
	exit 0
fi

base="${1:-${COMMITS_BASE:-}}"
if [ -z "$base" ]; then
	if default="$(git symbolic-ref -q --short refs/remotes/origin/HEAD)"; then
		base="$default"
	elif git rev-parse --verify -q origin/main >/dev/null; then
		base=origin/main
	fi
fi
if [ -n "$base" ]; then
	if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
		echo "commits: the base $base is not a commit" >&2
		exit 2
	fi
	commits="$(git rev-list --no-merges "$base..HEAD")"
	scope="the commits since $base"
else
	commits="$(git rev-parse HEAD)"
	scope="HEAD (no origin/HEAD or origin/main to compare with; hack/commits.sh BASE checks more)"
fi

failed=0
for commit in $commits; do
	message="$(git log -1 --format=%B "$commit")"
	subject="$(sed -n 1p <<<"$message")"
	second="$(sed -n 2p <<<"$message")"
	problems=()
	if [ -z "$subject" ]; then
		problems+=("an empty subject")
	fi
	if [ "${#subject}" -gt "$max" ]; then
		problems+=("a subject of ${#subject} characters, more than $max")
	fi
	if [[ "$subject" == *. ]]; then
		problems+=("a subject ending in a period")
	fi
	if [ -n "$second" ]; then
		problems+=("no blank line between the subject and the body")
	fi
	if [ "${#problems[@]}" -gt 0 ]; then
		failed=1
		printf '%s %s\n' "$(git rev-parse --short "$commit")" "$subject"
		printf '  has %s\n' "${problems[@]}"
	fi
done

if [ "$failed" -ne 0 ]; then
	echo "commits: a message above breaks the commit rules of CONTRIBUTING.md; reword it" \
		"(git rebase -i ${base:-HEAD~1} with reword, or git commit --amend for HEAD)" >&2
	exit 1
fi
echo "commits: $(wc -w <<<"$commits") checked, $scope"
