package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Every entry carries the same time so that the same inputs build the same image digest.
var epoch = time.Unix(0, 0).UTC()

// spec is what one image is built from.
type spec struct {
	tag        string
	rootfs     string   // a root filesystem tarball laid as the image's first layer
	files      []string // "src=dst": a file of this machine copied to dst in the image
	links      []string // "dst=target": a symbolic link at dst to a file of the image
	distroless bool     // lay distroless static's nonroot base under the files
	caFile     string
	zoneinfo   string
	user       string
	workdir    string
	entrypoint []string
	cmd        []string
	env        []string // KEY=VALUE, over the default PATH
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// jsonList parses a flag given as a JSON array of strings, as the Dockerfile writes ENTRYPOINT.
type jsonList []string

func (l *jsonList) String() string { b, _ := json.Marshal([]string(*l)); return string(b) }
func (l *jsonList) Set(v string) error {
	var s []string
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return fmt.Errorf("want a JSON array of strings: %w", err)
	}
	*l = s
	return nil
}

func main() {
	var (
		s    spec
		out  string
		file listFlag
		link listFlag
		env  listFlag
		ep   jsonList
		cmd  jsonList
	)
	flag.StringVar(&s.tag, "tag", "", "image reference the archive names, e.g. ghcr.io/codeport/codeport:0.1.0")
	flag.StringVar(&s.rootfs, "rootfs", "", "a root filesystem tarball (as mmdebstrap writes it), "+
		"laid as the first layer with its entries as they are, device nodes left out")
	flag.Var(&file, "file", "src=dst: copy a file of this machine to dst in the image (repeatable)")
	flag.Var(&link, "symlink", "dst=target: a symbolic link at dst to a file of the files' layer "+
		"(-file, -distroless), target relative to dst's directory or absolute (repeatable)")
	flag.BoolVar(&s.distroless, "distroless", false, "add distroless static's nonroot base files")
	flag.StringVar(&s.caFile, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle for -distroless")
	flag.StringVar(&s.zoneinfo, "zoneinfo", "/usr/share/zoneinfo", "time zone database for -distroless (empty: none)")
	flag.StringVar(&s.user, "user", "", "user[:group] the image runs as")
	flag.StringVar(&s.workdir, "workdir", "", "working directory (default: / or, with -distroless, /home/nonroot)")
	flag.Var(&ep, "entrypoint", `JSON array, e.g. ["/usr/local/bin/codeport"]`)
	flag.Var(&cmd, "cmd", `JSON array, e.g. ["--help"]`)
	flag.Var(&env, "env", "KEY=VALUE in the image's environment, replacing a default of the same "+
		"key (repeatable)")
	flag.StringVar(&out, "o", "", "docker-archive tarball to write")
	dockerfile := flag.String("dockerfile", "", "take the base, user, entrypoint, command and the "+
		"binary's place from this Dockerfile's final stage (with -binary)")
	binary := flag.String("binary", "", "with -dockerfile: the binary its final stage copies in")
	flag.Parse()
	s.files, s.links, s.env, s.entrypoint, s.cmd = file, link, env, ep, cmd
	if *dockerfile != "" {
		df, err := os.ReadFile(*dockerfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "image:", err)
			os.Exit(1)
		}
		if s, err = fromDockerfile(string(df), *binary, s); err != nil {
			fmt.Fprintln(os.Stderr, "image:", err)
			os.Exit(1)
		}
	}
	if err := run(s, out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(s spec, out string) error {
	if s.tag == "" || out == "" {
		return errors.New("-tag and -o are required")
	}
	ref, err := name.NewTag(s.tag)
	if err != nil {
		return fmt.Errorf("parse tag %q: %w", s.tag, err)
	}
	img, err := build(s)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	if err := tarball.Write(ref, img, f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", out, err)
	}
	return nil
}

// build lays the root filesystem, then the files, each as a layer on an empty base, and sets the
// configuration. Without a root filesystem the files' layer is there even when empty: an image
// has at least one layer.
func build(s spec) (v1.Image, error) {
	var layers []v1.Layer
	if s.rootfs != "" {
		layer, err := rootfsLayer(s.rootfs)
		if err != nil {
			return nil, err
		}
		layers = append(layers, layer)
	}
	if s.rootfs == "" || s.distroless || len(s.files) > 0 || len(s.links) > 0 {
		layer, err := filesLayer(s)
		if err != nil {
			return nil, err
		}
		layers = append(layers, layer)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	// The binaries are built for this machine, as is the node that runs them.
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = s.user
	cf.Config.Entrypoint = s.entrypoint
	cf.Config.Cmd = s.cmd
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if s.distroless {
		// As distroless: SSL_CERT_FILE points Go's and OpenSSL's clients at the bundle.
		env = append(env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
		cf.Config.WorkingDir = "/home/nonroot"
	}
	if s.workdir != "" {
		cf.Config.WorkingDir = s.workdir
	}
	if cf.Config.Env, err = withEnv(env, s.env); err != nil {
		return nil, err
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// withEnv sets each KEY=VALUE of set in env: a key env has takes the new value in its place,
// a new key comes last.
func withEnv(env, set []string) ([]string, error) {
	out := slices.Clone(env)
	for _, kv := range set {
		key, _, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("-env %q: want KEY=VALUE", kv)
		}
		i := slices.IndexFunc(out, func(e string) bool { return strings.HasPrefix(e, key+"=") })
		if i < 0 {
			out = append(out, kv)
			continue
		}
		out[i] = kv
	}
	return out, nil
}

// filesLayer lays distroless's base files, if asked, and the files and links of the spec.
func filesLayer(s spec) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	w := &layerWriter{tw: tw, dirs: map[string]bool{}, files: map[string]bool{}}
	if s.distroless {
		if err := w.distrolessBase(s.caFile, s.zoneinfo); err != nil {
			return nil, err
		}
	}
	for _, f := range s.files {
		src, dst, ok := strings.Cut(f, "=")
		if !ok || !path.IsAbs(dst) {
			return nil, fmt.Errorf("-file %q: want src=/absolute/dst", f)
		}
		if err := w.copyFile(src, dst); err != nil {
			return nil, err
		}
	}
	for _, l := range s.links {
		dst, target, ok := strings.Cut(l, "=")
		if !ok || !path.IsAbs(dst) || target == "" {
			return nil, fmt.Errorf("-symlink %q: want /absolute/dst=target", l)
		}
		if err := w.symlink(dst, target); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return layer, nil
}

// rootfsLayer lays an uncompressed root filesystem tarball as a layer, its entries as they are:
// names, modes, owners, links, extended attributes and modification times. The times are kept,
// not set to epoch as the files' layer's are: Python's bytecode caches record their sources'
// times, and with other times the interpreter would compile every module again on each start
// (on a read-only root filesystem, without saving it). The same tarball gives the same layer.
//
// Device nodes are left out, and hard links to them: the runtime mounts a /dev of its own over
// the one mmdebstrap fills, and an unpacker without CAP_MKNOD could not create them.
//
// go-containerregistry reads a layer several times (its digest, its diff ID, the archive): each
// read streams the tarball from the disk again, so that a root filesystem of hundreds of
// megabytes is never held in memory.
func rootfsLayer(tarPath string) (v1.Layer, error) {
	if _, err := os.Stat(tarPath); err != nil {
		return nil, fmt.Errorf("-rootfs: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		f, err := os.Open(tarPath)
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		go func() {
			err := copyRootfs(pw, f)
			_ = f.Close()
			// A reader that stops early closes pr; the copy then ends with ErrClosedPipe.
			pw.CloseWithError(err)
		}()
		return pr, nil
	})
	if err != nil {
		return nil, fmt.Errorf("root filesystem %s: %w", tarPath, err)
	}
	return layer, nil
}

// copyRootfs copies a tarball's entries from r to w, leaving out device nodes and hard links to
// them.
func copyRootfs(w io.Writer, r io.Reader) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	devices := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		switch {
		case h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock:
			devices[path.Clean(h.Name)] = true
			continue
		case h.Typeflag == tar.TypeLink && devices[path.Clean(h.Linkname)]:
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
}

// layerWriter writes tar entries, creating each parent directory once.
type layerWriter struct {
	tw    *tar.Writer
	dirs  map[string]bool
	files map[string]bool // regular files written, which links may point at
}

func (w *layerWriter) dir(p string, mode int64, uid int) error {
	p = path.Clean(p)
	if p == "/" || w.dirs[p] {
		return nil
	}
	if err := w.dir(path.Dir(p), 0o755, 0); err != nil {
		return err
	}
	w.dirs[p] = true
	return w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(p, "/") + "/",
		Mode: mode, Uid: uid, Gid: uid, ModTime: epoch, Format: tar.FormatPAX})
}

func (w *layerWriter) bytes(dst string, data []byte, mode int64) error {
	if err := w.dir(path.Dir(dst), 0o755, 0); err != nil {
		return err
	}
	if err := w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(dst, "/"),
		Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	if _, err := w.tw.Write(data); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	w.files[path.Clean(dst)] = true
	return nil
}

// symlink links dst to target, which must be a file already in the layer: a dangling link would
// only show when a container runs it.
func (w *layerWriter) symlink(dst, target string) error {
	resolved := target
	if !path.IsAbs(target) {
		resolved = path.Join(path.Dir(dst), target)
	}
	if !w.files[path.Clean(resolved)] {
		return fmt.Errorf("symlink %s -> %s: the image has no file %s", dst, target, resolved)
	}
	if err := w.dir(path.Dir(dst), 0o755, 0); err != nil {
		return err
	}
	if err := w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(dst, "/"),
		Linkname: target, Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	return nil
}

// copyFile copies a regular file, keeping whether it is executable.
func (w *layerWriter) copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("stat %s: %w", src, err)
	}
	mode := int64(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	return w.bytes(dst, data, mode)
}

// distroless static's nonroot image: its users, groups and name-service switch.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group         = "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n"
	nsswitch      = "hosts: files dns\n"
	nonrootUID    = 65532
	stickyTmpMode = 0o1777
)

func (w *layerWriter) distrolessBase(caFile, zoneinfo string) error {
	for _, f := range []struct {
		dst  string
		data string
	}{{"/etc/passwd", passwd}, {"/etc/group", group}, {"/etc/nsswitch.conf", nsswitch}} {
		if err := w.bytes(f.dst, []byte(f.data), 0o644); err != nil {
			return err
		}
	}
	if err := w.dir("/tmp", stickyTmpMode, 0); err != nil {
		return err
	}
	if err := w.dir("/home/nonroot", 0o700, nonrootUID); err != nil {
		return err
	}
	if err := w.copyFile(caFile, "/etc/ssl/certs/ca-certificates.crt"); err != nil {
		return fmt.Errorf("CA certificates (apt-get install ca-certificates): %w", err)
	}
	if zoneinfo == "" {
		return nil
	}
	var files []string
	err := filepath.WalkDir(zoneinfo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
			return nil
		}
		// Links to files (UTC -> Etc/UTC) become copies: the zones read the same either way.
		// Links to directories (posix -> .) are left out; their zones are there already.
		if d.Type()&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("time zone database %s: %w", zoneinfo, err)
	}
	slices.Sort(files)
	for _, p := range files {
		rel, err := filepath.Rel(zoneinfo, p)
		if err != nil {
			return fmt.Errorf("time zone database: %w", err)
		}
		if err := w.copyFile(p, path.Join("/usr/share/zoneinfo", filepath.ToSlash(rel))); err != nil {
			return err
		}
	}
	return nil
}
