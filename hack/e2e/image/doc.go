// Command image builds a container image from files on this machine, with no registry and no
// container daemon, and writes it as a docker-archive tarball that `ctr images import` loads.
// The end-to-end cluster (hack/e2e) runs its pause, CoreDNS, codeport and PostgreSQL images from
// it, and CloudNativePG's operator and the S3 object store its backups go to (hack/e2e/cnpg.sh).
//
// The files given with -file make one layer. With -rootfs, a root filesystem tarball (Debian's
// packages installed by mmdebstrap, for the PostgreSQL image) is laid under them as a layer of
// its own, its entries as they are but for device nodes; -env sets the image's environment over
// the default PATH.
//
// With -distroless the files' layer also carries what gcr.io/distroless/static-debian12:nonroot gives
// the Dockerfile's release image: the CA certificates, /etc/passwd and /etc/group with root,
// nobody and nonroot (65532), /etc/nsswitch.conf, /tmp and /home/nonroot, and the time zone
// database, and no shell. The image's user, working directory, entrypoint and command are
// passed as flags, and -symlink adds links to the files' layer's files (CloudNativePG's
// Dockerfile runs /manager, a link to operator/manager_<arch>, from WORKDIR /, where the operator
// looks for its binaries); the package's test reads the codeport image's from the Dockerfile and
// checks that an image built the way hack/e2e/images.sh builds it matches.
package main
