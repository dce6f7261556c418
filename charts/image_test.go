package charts_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerfileStages splits the Dockerfile into its stages' instructions, continuation lines joined.
func dockerfileStages(t *testing.T) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var stages [][]string
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cur += line
		if strings.HasPrefix(cur, "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], cur)
		}
		cur = ""
	}
	return stages
}

// makePlatforms reads the Makefile's PLATFORMS, the platforms of the published image.
func makePlatforms(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PLATFORMS \?= (.+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no PLATFORMS in the Makefile")
	}
	return strings.Split(string(m[1]), ",")
}

// TestImageBuildsForEveryPlatform: the build stage runs on the builder's platform and
// cross-compiles for the target's, the runtime stage is the target's, and every package of the
// binary is there for each published platform without cgo (go list: none excluded by build
// constraints, which is how a cgo-only or platform-specific dependency would break the image;
// compiling each would take minutes).
func TestImageBuildsForEveryPlatform(t *testing.T) {
	t.Parallel()
	stages := dockerfileStages(t)
	if len(stages) != 2 {
		t.Fatalf("%d Dockerfile stages, want build and runtime", len(stages))
	}
	build, runtime := strings.Join(stages[0], "\n"), strings.Join(stages[1], "\n")
	for _, want := range []string{"FROM --platform=$BUILDPLATFORM ", "ARG TARGETOS TARGETARCH"} {
		if !strings.Contains(build, want) {
			t.Errorf("build stage lacks %q", want)
		}
	}
	if !regexp.MustCompile(`CGO_ENABLED=0 GOOS=\$TARGETOS GOARCH=\$TARGETARCH\s+go build `).MatchString(build) {
		t.Errorf("build stage does not cross-compile for the target platform:\n%s", build)
	}
	if strings.Contains(stages[1][0], "--platform") || !strings.Contains(runtime, "USER 65532:65532") {
		t.Errorf("runtime stage:\n%s", runtime)
	}

	for _, platform := range makePlatforms(t) {
		goos, goarch, ok := strings.Cut(platform, "/")
		if !ok {
			t.Fatalf("platform %q", platform)
		}
		cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Error,DepsErrors", "..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list for %s: %v", platform, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		for {
			var pkg struct {
				ImportPath string
				Error      *struct{ Err string }
				DepsErrors []struct{ Err string }
			}
			if err := dec.Decode(&pkg); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if pkg.Error != nil || len(pkg.DepsErrors) > 0 {
				t.Errorf("%s does not build for %s: %v %v", pkg.ImportPath, platform, pkg.Error, pkg.DepsErrors)
			}
		}
	}
}

// TestBaseImagesArePinnedByDigest: the syntax frontend and every base image carry a tag (what the
// image is) and the digest of its index (which bytes are built on), and the Go image's tag is
// go.mod's Go version, since the official image will not fetch another toolchain.
func TestBaseImagesArePinnedByDigest(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)
	syntax := regexp.MustCompile(`(?m)^# syntax=(\S+)`).FindSubmatch(src)
	if syntax == nil {
		t.Fatal("no syntax line")
	}
	refs := []string{string(syntax[1])}
	for _, stage := range dockerfileStages(t) {
		fields := strings.Fields(stage[0])
		image := fields[1]
		if strings.HasPrefix(image, "--platform=") {
			image = fields[2]
		}
		refs = append(refs, image)
	}
	goMod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(goMod)
	if goVersion == nil {
		t.Fatal("no go directive in go.mod")
	}
	sawGo := false
	for _, ref := range refs {
		if !pinned.MatchString(ref) {
			t.Errorf("%s is not pinned as name:tag@sha256:<digest>", ref)
		}
		if name, rest, _ := strings.Cut(ref, ":"); name == "golang" {
			sawGo = true
			if tag, _, _ := strings.Cut(rest, "@"); tag != string(goVersion[1]) {
				t.Errorf("build image golang:%s, go.mod needs go %s", tag, goVersion[1])
			}
		}
	}
	if !sawGo {
		t.Error("no golang build image")
	}
}
