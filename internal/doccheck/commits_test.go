package doccheck

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo is a throwaway repository for the commit-message check.
type gitRepo struct {
	t   *testing.T
	dir string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not installed: %v", err)
	}
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

// git runs git in the repository, as a committer of its own, and returns its output.
func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir, cmd.Env = r.dir, gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitEnv is the environment without git's variables (a hook running the tests sets GIT_DIR,
// which would point git at the real repository) or the user's configuration.
func gitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
}

// commit records a commit with the message as it is (no cleanup) and returns its hash.
func (r *gitRepo) commit(message string) string {
	r.t.Helper()
	r.git("commit", "-q", "--allow-empty", "--cleanup=verbatim", "-m", message)
	return r.git("rev-parse", "HEAD")
}

// check runs hack/commits.sh in the repository with args and returns its output and whether it
// passed.
func (r *gitRepo) check(args ...string) (string, bool) {
	r.t.Helper()
	script, err := filepath.Abs(filepath.Join(repoRoot, "hack", "commits.sh"))
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(script, args...)
	cmd.Dir, cmd.Env = r.dir, append(gitEnv(), "COMMITS_BASE=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		r.t.Fatalf("run %s: %v", script, err)
	}
	return string(out), err == nil
}

// subject72 is a subject of exactly 72 characters, one of them an arrow of three bytes.
var subject72 = "Count the arrow → as one character " + strings.Repeat("x", 72-35)

// oldSubject is a subject of the history from before the rules: too long.
const oldSubject = "An old subject from before the rules were written down, longer than seventy-two characters"

// badMessages break one rule each, with what the check says of them.
var badMessages = []struct{ message, says string }{
	{subject72 + "y", "a subject of 73 characters, more than 72"},
	{"Add the thing.", "a subject ending in a period"},
	{"Add the thing\nBecause the body follows the subject at once.", "no blank line between the subject and the body"},
	{"\n\nA body without a subject.", "an empty subject"},
}

// TestCommitMessagesSinceTheBase: hack/commits.sh (make lint) checks the commits since the
// remote's default branch, or origin/main, or a base it is given, and only those: it passes good
// messages and merges, fails each bad one, and leaves older history alone.
func TestCommitMessagesSinceTheBase(t *testing.T) {
	if n := len([]rune(subject72)); n != 72 {
		t.Fatalf("subject72 has %d characters", n)
	}
	r := newGitRepo(t)
	r.commit(oldSubject)
	old := r.commit(oldSubject + ", again.")
	r.git("update-ref", "refs/remotes/origin/main", old)
	r.git("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")

	r.commit("Add the thing\n\nBecause partners asked for it; the body says why.\n")
	r.commit(subject72)
	r.git("checkout", "-q", "-b", "topic")
	r.commit("Add another thing")
	r.git("checkout", "-q", "main")
	r.git("merge", "-q", "--no-ff", "topic",
		"-m", "Merge the branch topic, a message git writes and nobody keeps to seventy-two characters")
	good := r.git("rev-parse", "HEAD")

	out, ok := r.check()
	if !ok || !strings.Contains(out, "3 checked, the commits since origin/main") {
		t.Fatalf("good messages since origin/HEAD: passed %v, want true, saying it checked 3:\n%s", ok, out)
	}
	for _, bad := range badMessages {
		hash := r.commit(bad.message)
		fails := func(base string, args ...string) {
			t.Helper()
			out, ok := r.check(args...)
			if ok || !strings.Contains(out, hash[:7]) || !strings.Contains(out, "has "+bad.says) {
				t.Errorf("message %q, base %s: passed %v, want false, naming %s and saying %q:\n%s",
					bad.message, base, ok, hash[:7], bad.says, out)
			}
		}
		fails("origin/HEAD")
		r.git("symbolic-ref", "--delete", "refs/remotes/origin/HEAD")
		fails("origin/main")
		r.git("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
		fails("given", good)
		r.git("reset", "-q", "--hard", good)
	}

	// On the default branch itself there is nothing new to check.
	r.git("update-ref", "refs/remotes/origin/main", good)
	if out, ok := r.check(); !ok || !strings.Contains(out, "0 checked") {
		t.Errorf("HEAD on origin/main: passed %v, want true, checking none:\n%s", ok, out)
	}
}

// TestCommitMessagesWithoutARemote: in a checkout without origin, hack/commits.sh checks HEAD
// alone, whatever the history below it.
func TestCommitMessagesWithoutARemote(t *testing.T) {
	r := newGitRepo(t)
	r.commit(oldSubject)
	r.commit("Add the thing\n\nThe body says why.")
	if out, ok := r.check(); !ok || !strings.Contains(out, "1 checked, HEAD") {
		t.Errorf("good HEAD over old history: passed %v, want true, checking HEAD alone:\n%s", ok, out)
	}
	for _, bad := range badMessages {
		hash := r.commit(bad.message)
		if out, ok := r.check(); ok || !strings.Contains(out, hash[:7]) || !strings.Contains(out, "has "+bad.says) {
			t.Errorf("bad HEAD %q: passed %v, want false, saying %q:\n%s", bad.message, ok, bad.says, out)
		}
		r.git("reset", "-q", "--hard", "HEAD~1")
	}
}
