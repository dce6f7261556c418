package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The Dockerfile's final stage as the release build reads it, found here by plain patterns so
// that the tool's own parser is checked, not trusted.
var (
	finalFrom  = regexp.MustCompile(`(?m)^FROM (\S+)\s*$`)
	copyBinary = regexp.MustCompile(`(?m)^COPY --from=build \S+ (\S+)\s*$`)
	userLine   = regexp.MustCompile(`(?m)^USER (\S+)\s*$`)
	entryLine  = regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])\s*$`)
	cmdLine    = regexp.MustCompile(`(?m)^CMD (\[.*\])\s*$`)
)

// TestImageMatchesDockerfile builds the codeport image the way hack/e2e/images.sh does and
// checks it against the Dockerfile's release image: the same user, entrypoint and command, the
// binary where the Dockerfile copies it, and the nonroot distroless base's files (CA
// certificates, nonroot 65532 in /etc/passwd, no shell).
func TestImageMatchesDockerfile(t *testing.T) {
	dockerfile, err := os.ReadFile("../../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(dockerfile)
	froms := finalFrom.FindAllStringSubmatch(df, -1)
	if len(froms) == 0 || !strings.HasPrefix(froms[len(froms)-1][1], distrolessBase+"@sha256:") {
		t.Fatalf("the Dockerfile's final stage is no longer %s (pinned): teach hack/e2e/image its files", distrolessBase)
	}
	want := map[string]string{}
	lines := map[string]*regexp.Regexp{"copy": copyBinary, "user": userLine, "entrypoint": entryLine, "cmd": cmdLine}
	for name, re := range lines {
		m := re.FindAllStringSubmatch(df, -1)
		if len(m) != 1 {
			t.Fatalf("Dockerfile: want one %s line in the final stage, found %d", name, len(m))
		}
		want[name] = m[0][1]
	}

	dir := t.TempDir()
	binary := filepath.Join(dir, "codeport")
	binaryBytes := []byte("\x7fELF not really a binary")
	if err := os.WriteFile(binary, binaryBytes, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := fromDockerfile(df, binary, spec{caFile: "testdata/ca-certificates.crt", zoneinfo: "testdata/zoneinfo"})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "codeport.tar")
	s.tag = "ghcr.io/codeport/codeport:e2e"
	if err := run(s, archive); err != nil {
		t.Fatal(err)
	}
	// Read back what ctr imports.
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != want["user"] {
		t.Errorf("user %q, Dockerfile %q", cf.Config.User, want["user"])
	}
	if got := cf.Config.Entrypoint; !slices.Equal(got, execFormOf(t, want["entrypoint"])) {
		t.Errorf("entrypoint %q, Dockerfile %s", got, want["entrypoint"])
	}
	if got := cf.Config.Cmd; !slices.Equal(got, execFormOf(t, want["cmd"])) {
		t.Errorf("cmd %q, Dockerfile %s", got, want["cmd"])
	}

	files, contents := layerFiles(t, img)
	dst := want["copy"]
	if h := files[dst]; h == nil || h.Mode&0o111 == 0 || contents[dst] != string(binaryBytes) {
		t.Errorf("the binary is not at %s, executable: %+v", dst, h)
	}
	if len(cf.Config.Entrypoint) == 0 || cf.Config.Entrypoint[0] != dst {
		t.Errorf("entrypoint %q does not run %s", cf.Config.Entrypoint, dst)
	}
	if contents["/etc/ssl/certs/ca-certificates.crt"] == "" {
		t.Error("no CA certificates at /etc/ssl/certs/ca-certificates.crt")
	}
	uid, _, _ := strings.Cut(want["user"], ":")
	if !strings.Contains(contents["/etc/passwd"], "nonroot:x:"+uid+":"+uid+":nonroot:/home/nonroot:") {
		t.Errorf("/etc/passwd has no nonroot user %s:\n%s", uid, contents["/etc/passwd"])
	}
	if h := files["/home/nonroot"]; h == nil || h.Uid != 65532 {
		t.Errorf("/home/nonroot is not nonroot's: %+v", h)
	}
	if h := files["/tmp"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp is not world-writable and sticky: %+v", h)
	}
	if files["/usr/share/zoneinfo/UTC"] == nil {
		t.Error("no time zone database")
	}
	for p := range files {
		if base := filepath.Base(p); slices.Contains([]string{"sh", "bash", "dash", "busybox"}, base) {
			t.Errorf("the image has a shell: %s", p)
		}
	}
}

// TestFromDockerfileRefusesOtherBases: a base other than distroless static nonroot would give
// the release image files this tool does not lay.
func TestFromDockerfileRefusesOtherBases(t *testing.T) {
	for name, df := range map[string]string{
		"other base": "FROM debian:12\nCOPY --from=build /out/codeport /usr/local/bin/codeport\n",
		"a RUN":      "FROM " + distrolessBase + "\nRUN true\nCOPY --from=build /a /b\n",
		"two copies": "FROM " + distrolessBase + "\nCOPY --from=build /a /b\nCOPY --from=build /c /d\n",
	} {
		if _, err := fromDockerfile(df, "/bin/true", spec{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// layerFiles reads the image's files: their headers and contents by absolute path.
func layerFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	files := map[string]*tar.Header{}
	contents := map[string]string{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := "/" + strings.TrimSuffix(h.Name, "/")
		files[p] = h
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		contents[p] = string(b)
	}
	return files, contents
}

func execFormOf(t *testing.T, s string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("Dockerfile %s: %v", s, err)
	}
	return v
}
