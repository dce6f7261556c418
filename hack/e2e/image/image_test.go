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
	"time"

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
	img, cf := buildArchive(t, s, archive)
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

// readImage reads an archive back as ctr imports it: the image and its configuration.
func readImage(t *testing.T, archive string) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return img, cf
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

// TestRootfsLayer builds an image from a root filesystem tarball laid out as mmdebstrap writes
// one (./-relative names, pax headers, device nodes in /dev) and checks that its one layer holds
// every entry as it was, in order, with its mode, owner, time, link and extended attributes,
// except the device nodes and a hard link to one; that -env replaces the default PATH and adds
// to it; and that the same tarball, wherever it lies, builds the same image digest.
func TestRootfsLayer(t *testing.T) {
	dir := t.TempDir()
	mtime := time.Date(2023, 5, 1, 12, 0, 0, 0, time.UTC)
	entries := []rootfsEntry{
		{h: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}},
		{h: tar.Header{Typeflag: tar.TypeDir, Name: "./dev/", Mode: 0o755}},
		{h: tar.Header{Typeflag: tar.TypeChar, Name: "./dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3}, device: true},
		{h: tar.Header{Typeflag: tar.TypeBlock, Name: "./dev/vda", Mode: 0o660, Gid: 6, Devmajor: 254}, device: true},
		{h: tar.Header{Typeflag: tar.TypeLink, Name: "./dev/null2", Linkname: "./dev/null"}, device: true},
		{h: tar.Header{Typeflag: tar.TypeSymlink, Name: "./dev/fd", Linkname: "/proc/self/fd", Mode: 0o777}},
		{h: tar.Header{Typeflag: tar.TypeDir, Name: "./etc/", Mode: 0o755}},
		{h: tar.Header{Typeflag: tar.TypeReg, Name: "./etc/shadow", Mode: 0o640, Gid: 42},
			data: "postgres:*:19000:0:99999:7:::\n"},
		{h: tar.Header{Typeflag: tar.TypeDir, Name: "./tmp/", Mode: 0o1777}},
		{h: tar.Header{Typeflag: tar.TypeDir, Name: "./usr/", Mode: 0o755}},
		{h: tar.Header{Typeflag: tar.TypeDir, Name: "./usr/bin/", Mode: 0o755}},
		{h: tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/perl", Mode: 0o755}, data: "\x7fELF perl"},
		{h: tar.Header{Typeflag: tar.TypeLink, Name: "./usr/bin/perl5.36.0", Linkname: "./usr/bin/perl"}},
		{h: tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/ping", Mode: 0o755,
			PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02"}},
			data: "\x7fELF ping"},
		{h: tar.Header{Typeflag: tar.TypeDir, Name: "./var/lib/postgresql/", Mode: 0o755, Uid: 26, Gid: 26}},
	}
	rootfs := filepath.Join(dir, "rootfs.tar")
	writeRootfs(t, rootfs, entries, mtime)

	wantEnv := []string{"PATH=/usr/lib/postgresql/15/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	s := spec{tag: "ghcr.io/codeport/postgresql:15.20-bookworm", rootfs: rootfs, user: "26:26",
		env: []string{"LANG=C.UTF-8", "PATH=/usr/lib/postgresql/15/bin:/usr/bin:/bin"}}
	img, cf := buildArchive(t, s, filepath.Join(dir, "a.tar"))
	if !slices.Equal(cf.Config.Env, wantEnv) {
		t.Errorf("env %q, want %q", cf.Config.Env, wantEnv)
	}
	if cf.Config.User != "26:26" {
		t.Errorf("user %q, want 26:26", cf.Config.User)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want the root filesystem's alone", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for _, e := range entries {
		if e.device {
			continue
		}
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("want %s next: %v", e.h.Name, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		want := e.h
		if h.Name != want.Name || h.Typeflag != want.Typeflag || h.Mode != want.Mode || h.Uid != want.Uid ||
			h.Gid != want.Gid || h.Linkname != want.Linkname || !h.ModTime.Equal(mtime) || string(data) != e.data {
			t.Errorf("entry %s: got %c %o %d:%d ->%q %s %q, want %c %o %d:%d ->%q %s %q", want.Name,
				h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname, h.ModTime, data,
				want.Typeflag, want.Mode, want.Uid, want.Gid, want.Linkname, mtime, e.data)
		}
		for k, v := range want.PAXRecords {
			if h.PAXRecords[k] != v {
				t.Errorf("entry %s: %s %q, want %q", want.Name, k, h.PAXRecords[k], v)
			}
		}
	}
	if h, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("layer has more entries than the tarball: %+v, %v", h, err)
	}

	// The same tarball elsewhere, written to another archive.
	moved := filepath.Join(dir, "moved", "rootfs.tar")
	if err := os.Mkdir(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rootfs, moved); err != nil {
		t.Fatal(err)
	}
	s.rootfs = moved
	again, _ := buildArchive(t, s, filepath.Join(dir, "b.tar"))
	if d1, d2 := digestOf(t, img), digestOf(t, again); d1 != d2 {
		t.Errorf("the same root filesystem built %s, then %s", d1, d2)
	}
}

// TestWithEnv: -env replaces a default in its place and appends a new key; anything but
// KEY=VALUE is refused.
func TestWithEnv(t *testing.T) {
	defaults := []string{"PATH=/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	for _, tc := range []struct {
		name string
		set  []string
		want []string
	}{
		{"none", nil, defaults},
		{"replaces in place", []string{"PATH=/x:/usr/bin"}, []string{"PATH=/x:/usr/bin", defaults[1]}},
		{"appends", []string{"LANG=C.UTF-8"}, append(slices.Clone(defaults), "LANG=C.UTF-8")},
		{"empty value", []string{"PGDATA="}, append(slices.Clone(defaults), "PGDATA=")},
		{"value with =", []string{"A=b=c"}, append(slices.Clone(defaults), "A=b=c")},
		{"last wins", []string{"A=1", "A=2"}, append(slices.Clone(defaults), "A=2")},
		{"key prefix is another key", []string{"PATHS=1"}, append(slices.Clone(defaults), "PATHS=1")},
		{"no =", []string{"LANG"}, nil},
		{"no key", []string{"=x"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withEnv(defaults, tc.set)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("accepted %q: %q", tc.set, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSymlinksAndWorkdir builds images laid out as CloudNativePG's Dockerfile lays its operator
// (the binary in /operator, /manager a link to it, WORKDIR /, where the operator looks for
// operator/manager_<arch>), with and without a root filesystem under them, and checks that a
// link to a file the files' layer lacks is refused.
func TestSymlinksAndWorkdir(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "manager")
	if err := os.WriteFile(binary, []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		links       []string
		workdir     string
		distroless  bool
		rootfs      bool              // lay a root filesystem holding /usr/bin/perl under the files
		noFiles     bool              // no -file: the binary is not in the image
		wantLinks   map[string]string // path in the image -> link target
		wantFiles   []string          // regular files in the image
		wantWorkdir string
		wantErr     string
	}{
		{
			name: "relative link, workdir over distroless's", links: []string{"/manager=operator/manager_amd64"},
			workdir: "/", distroless: true,
			wantLinks: map[string]string{"/manager": "operator/manager_amd64"}, wantWorkdir: "/",
		},
		{
			name: "absolute link in a new directory", links: []string{"/usr/local/bin/manager=/operator/manager_amd64"},
			wantLinks: map[string]string{"/usr/local/bin/manager": "/operator/manager_amd64"},
		},
		{
			name: "distroless's workdir when none is given", distroless: true, wantWorkdir: "/home/nonroot",
		},
		{
			name: "dangling link", links: []string{"/manager=operator/manager_arm64"},
			wantErr: "the image has no file /operator/manager_arm64",
		},
		{
			name: "link resolved from its own directory", links: []string{"/bin/manager=operator/manager_amd64"},
			wantErr: "the image has no file /bin/operator/manager_amd64",
		},
		{
			name: "relative destination", links: []string{"manager=operator/manager_amd64"},
			wantErr: "want /absolute/dst=target",
		},
		{name: "no target", links: []string{"/manager="}, wantErr: "want /absolute/dst=target"},
		{
			name: "link and workdir over a root filesystem", links: []string{"/manager=operator/manager_amd64"},
			workdir: "/", rootfs: true,
			wantLinks: map[string]string{"/manager": "operator/manager_amd64"}, wantWorkdir: "/",
			wantFiles: []string{"/usr/bin/perl", "/operator/manager_amd64"},
		},
		{
			// The links are checked against the files' layer alone.
			name: "link into the root filesystem", links: []string{"/usr/local/bin/perl=/usr/bin/perl"}, rootfs: true,
			wantErr: "the image has no file /usr/bin/perl",
		},
		{
			// Not left out for want of files to lay: refused as any dangling link.
			name: "link over a root filesystem with no files", links: []string{"/manager=operator/manager_amd64"},
			rootfs: true, noFiles: true, wantErr: "the image has no file /operator/manager_amd64",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec{
				tag: "ghcr.io/cloudnative-pg/cloudnative-pg:1.28.0", files: []string{binary + "=/operator/manager_amd64"},
				links: tc.links, workdir: tc.workdir, distroless: tc.distroless,
				caFile: "testdata/ca-certificates.crt", zoneinfo: "testdata/zoneinfo",
			}
			if tc.noFiles {
				s.files = nil
			}
			if tc.rootfs {
				s.rootfs = filepath.Join(t.TempDir(), "rootfs.tar")
				writeRootfs(t, s.rootfs, rootfsWithPerl, epoch)
			}
			archive := filepath.Join(t.TempDir(), "image.tar")
			err := run(s, archive)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			img, cf := readImage(t, archive)
			if cf.Config.WorkingDir != tc.wantWorkdir {
				t.Errorf("working directory %q, want %q", cf.Config.WorkingDir, tc.wantWorkdir)
			}
			checkLayout(t, img, tc.wantLinks, tc.wantFiles)
		})
	}
}

// checkLayout checks that the image holds each link of links, path -> target, and each regular
// file of files.
func checkLayout(t *testing.T, img v1.Image, links map[string]string, files []string) {
	t.Helper()
	got, _ := layerFiles(t, img)
	for p, target := range links {
		if h := got[p]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != target {
			t.Errorf("%s is not a link to %s: %+v", p, target, h)
		}
	}
	for _, p := range files {
		if h := got[p]; h == nil || h.Typeflag != tar.TypeReg {
			t.Errorf("%s is not a regular file: %+v", p, h)
		}
	}
}

// rootfsWithPerl is a root filesystem of one file, for images that lay files over one.
var rootfsWithPerl = []rootfsEntry{
	{h: tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}},
	{h: tar.Header{Typeflag: tar.TypeDir, Name: "./usr/", Mode: 0o755}},
	{h: tar.Header{Typeflag: tar.TypeDir, Name: "./usr/bin/", Mode: 0o755}},
	{h: tar.Header{Typeflag: tar.TypeReg, Name: "./usr/bin/perl", Mode: 0o755}, data: "\x7fELF perl"},
}

type rootfsEntry struct {
	h      tar.Header
	data   string
	device bool // left out of the layer
}

func writeRootfs(t *testing.T, p string, entries []rootfsEntry, mtime time.Time) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, e := range entries {
		h := e.h
		h.ModTime, h.Size, h.Format = mtime, int64(len(e.data)), tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// buildArchive runs the tool as hack/e2e/images.sh does and reads back what ctr imports.
func buildArchive(t *testing.T, s spec, archive string) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	if err := run(s, archive); err != nil {
		t.Fatal(err)
	}
	return readImage(t, archive)
}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
