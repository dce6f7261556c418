#!/usr/bin/env bash
# A single-node Kubernetes cluster on this machine, with no registry and no internet: containerd
# and runc from Debian, the control plane and kubelet built from source (hack/e2e/kube.sh), etcd
# from hack/envtest.sh, images built locally (hack/e2e/images.sh) and imported into containerd.
# NetworkPolicies are enforced: the bridge CNI plugin enforces none, so kube-router's network
# policy controller (hack/e2e/kube-router.sh) runs on the node beside it, and bridged Pod traffic
# passes through iptables (net.bridge.bridge-nf-call-iptables=1), where its rules are.
#
#   hack/e2e/cluster.sh up     start it (stopping what an earlier run left first); prints the
#                              exports the e2e test reads (KUBECONFIG, KUBECTL, E2E_DATABASE_URL,
#                              E2E_REDIS_URL, E2E_AUDIT_LOG, E2E_IMAGE, E2E_NETCHECK_IMAGE)
#   hack/e2e/cluster.sh down   stop it and remove what it created on the host
#   hack/e2e/cluster.sh paths  install the host packages and print the paths up resolves from
#                              them (CNI_BIN, PG_BINDIR), starting nothing (hack/fresh checks it)
#
# Needs root (containerd, network namespaces, iptables, cgroups) and the packages of
# hack/e2e/deps.sh. Binaries and images are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/codeport;
# the running cluster lives in E2E_RUN_DIR (default /run/codeport-e2e). Before it starts, up
# records which pieces of host state already existed (/run/netns, /var/lib/cni, the cni0 bridge,
# KUBE-*/CNI-* iptables chains, ipsets, kubepods cgroups, net.ipv4.ip_forward,
# net.bridge.bridge-nf-call-iptables); down removes only what was not there, and kills only the
# processes whose PIDs up recorded.
#
# PostgreSQL and Redis are the host's own servers (Debian's, as hack/testenv.sh uses), a pair
# for this cluster only, listening on the node's address with passwords, so that Pods reach them
# as a managed database outside the cluster.
#
# Fixed ports and ranges: the API server on 6443, etcd on 2379/2380, kubelet, kube-proxy,
# controller-manager and scheduler on 10248-10259; Pods in 10.88.0.0/16, Services in
# 10.96.0.0/16 (kube-dns 10.96.0.10).
set -euo pipefail

HACK="$(cd "$(dirname "$0")/.." && pwd)"
RUN="${E2E_RUN_DIR:-/run/codeport-e2e}"
NODE="codeport-e2e"
POD_CIDR="10.88.0.0/16"
SERVICE_CIDR="10.96.0.0/16"
DNS_IP="10.96.0.10"
PG_PORT="${E2E_PG_PORT:-55440}"
REDIS_PORT="${E2E_REDIS_PORT:-56390}"
BRIDGE="cni0"
NS="k8s.io"
log() { echo "e2e-cluster: $*" >&2; }

node_ip() {
  local dev
  dev="$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1); exit}')"
  ip -4 -o addr show dev "${dev}" | awk '{sub("/.*", "", $4); print $4; exit}'
}

# start NAME CMD...: runs a component in the background, its output in RUN/logs/NAME.log, and
# records its PID for down.
start() {
  local name="$1"
  shift
  "$@" >"${RUN}/logs/${name}.log" 2>&1 &
  echo "$!" >"${RUN}/pids/${name}"
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what="$1" secs="$2"
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS > deadline)); then
      log "${what} not ready after ${secs}s; logs in ${RUN}/logs"
      return 1
    fi
    sleep 0.5
  done
}

chains() { iptables -t "$1" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE|CNI)-/ {print $2}' | sort; }

record_host_state() {
  local before="${RUN}/before"
  mkdir -p "${before}"
  for p in /run/netns /var/lib/cni; do
    [[ -e "${p}" ]] && echo "${p}" >>"${before}/paths"
  done
  touch "${before}/paths"
  if ip link show "${BRIDGE}" >/dev/null 2>&1; then echo yes >"${before}/bridge"; fi
  for t in filter nat mangle; do chains "${t}" >"${before}/chains-${t}"; done
  find /sys/fs/cgroup -maxdepth 2 -name kubepods -type d >"${before}/cgroups" 2>/dev/null || true
  sysctl -n net.ipv4.ip_forward >"${before}/ip_forward"
  sysctl -n net.bridge.bridge-nf-call-iptables >"${before}/bridge_nf_call_iptables"
  ipset list -n 2>/dev/null | sort >"${before}/ipsets" || true
  ls /run/netns >"${before}/netns" 2>/dev/null || true
}

write_certs() {
  local pki="${RUN}/pki" ip="$1"
  mkdir -p "${pki}"
  (
    cd "${pki}"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=codeport-e2e-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    printf 'subjectAltName=IP:%s,IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost\n' \
      "${ip}" >apiserver.ext
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key \
      -out apiserver.csr 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    # The API server's client certificate towards the kubelet (logs, exec, port-forward).
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
      -keyout kubelet-client.key -out kubelet-client.csr 2>/dev/null
    openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -out kubelet-client.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  # Static tokens, one per client: user,uid,"groups".
  local admin kubelet proxy cm sched router
  admin="$(openssl rand -hex 16)" kubelet="$(openssl rand -hex 16)" proxy="$(openssl rand -hex 16)"
  cm="$(openssl rand -hex 16)" sched="$(openssl rand -hex 16)" router="$(openssl rand -hex 16)"
  {
    echo "${admin},admin,admin,\"system:masters\""
    echo "${kubelet},system:node:${NODE},kubelet,\"system:nodes\""
    echo "${proxy},system:kube-proxy,kube-proxy"
    echo "${cm},system:kube-controller-manager,kube-controller-manager"
    echo "${sched},system:kube-scheduler,kube-scheduler"
    echo "${router},system:kube-router,kube-router"
  } >"${pki}/tokens.csv"
  chmod 600 "${pki}"/*.key "${pki}/tokens.csv"
  kubeconfig admin "${admin}" "${ip}"
  kubeconfig kubelet "${kubelet}" "${ip}"
  kubeconfig kube-proxy "${proxy}" "${ip}"
  kubeconfig controller-manager "${cm}" "${ip}"
  kubeconfig scheduler "${sched}" "${ip}"
  kubeconfig kube-router "${router}" "${ip}"
}

kubeconfig() {
  local name="$1" token="$2" ip="$3"
  cat >"${RUN}/${name}.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://${ip}:6443
    certificate-authority: ${RUN}/pki/ca.crt
users:
- name: ${name}
  user:
    token: ${token}
contexts:
- name: e2e
  context: {cluster: e2e, user: ${name}}
current-context: e2e
EOF
  chmod 600 "${RUN}/${name}.kubeconfig"
}

write_configs() {
  local ip="$1"
  mkdir -p "${RUN}/cni/net.d" "${RUN}/containerd"
  cat >"${RUN}/containerd/config.toml" <<EOF
version = 2
root = "${STATE}/containerd"
state = "${RUN}/containerd/state"
[grpc]
  address = "${RUN}/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # runc cannot lower oom_score_adj in a sandbox without CAP_SYS_RESOURCE (as in some VMs).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN}"
    conf_dir = "${RUN}/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
  cat >"${RUN}/cni/net.d/10-codeport-e2e.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "codeport-e2e",
  "plugins": [
    {
      "type": "bridge", "bridge": "${BRIDGE}", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_CIDR}"}]],
               "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "${RUN}/cni/ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"${RUN}/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${ip}
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${RUN}/pki/ca.crt}
authorization: {mode: Webhook}
# The kernel mounts cgroup v1 and v2 side by side; kubelet manages v1 through cgroupfs.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: [${DNS_IP}]
clusterDomain: cluster.local
containerRuntimeEndpoint: unix://${RUN}/containerd/containerd.sock
podLogsDir: ${RUN}/pod-logs
# Imported images cannot be pulled back: never collect them, and evict only when really short.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
serializeImagePulls: false
EOF
  # What ServiceAccounts do, for the test's check that the API server denied them nothing.
  cat >"${RUN}/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
EOF
  cat >"${RUN}/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: ${POD_CIDR}
hostnameOverride: ${NODE}
bindAddress: ${ip}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection: {kubeconfig: ${RUN}/kube-proxy.kubeconfig}
# Leave the host's conntrack sysctls alone.
conntrack: {maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# CoreDNS as a Deployment behind kube-dns, as clusters run it; non-root on port 1053.
apply_dns() {
  "${KUBECTL}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:1053 {
        errors
        health :8080
        ready :8181
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        forward . /etc/resolv.conf
        cache 30
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: 1
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: coredns
        image: ${COREDNS_IMAGE}
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 1053, protocol: UDP}
        - {name: dns-tcp, containerPort: 1053, protocol: TCP}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        livenessProbe: {httpGet: {path: /health, port: 8080}, initialDelaySeconds: 10}
        resources: {requests: {cpu: 50m, memory: 32Mi}, limits: {memory: 128Mi}}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: config, mountPath: /etc/coredns}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: ${DNS_IP}
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, targetPort: 1053, protocol: UDP}
  - {name: dns-tcp, port: 53, targetPort: 1053, protocol: TCP}
EOF
}

# bridge_netfilter: bridged Pod-to-Pod frames pass through iptables only with br_netfilter, built
# in or loaded here (it stays loaded); without it no NetworkPolicy between Pods could be enforced.
bridge_netfilter() {
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] || modprobe br_netfilter 2>/dev/null || true
  [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] ||
    { log "the kernel has no br_netfilter (net.bridge.bridge-nf-call-iptables); NetworkPolicies cannot be enforced"; exit 1; }
}

# The NetworkPolicy engine reads what its policies select and changes nothing in the cluster.
apply_policy_engine_rbac() {
  "${KUBECTL}" apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "codeport-e2e:kube-router"}
rules:
- apiGroups: [""]
  resources: [pods, namespaces, nodes, services, endpoints]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "codeport-e2e:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "codeport-e2e:kube-router"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-router"}]
EOF
}

# start_policy_engine runs kube-router's network policy controller alone: no BGP router, no
# service proxy (kube-proxy has the Services), no load balancer allocator, no health or metrics
# listener. It programs this node's Pods only (the Node named --hostname-override), in the filter
# table's KUBE-ROUTER-* and KUBE-POD-FW-*/KUBE-NWPLCY-* chains and KUBE-SRC-*/KUBE-DST-* ipsets,
# which down removes as it removes kube-proxy's chains.
start_policy_engine() {
  start kube-router "${KUBE_ROUTER}" --kubeconfig "${RUN}/kube-router.kubeconfig" \
    --hostname-override "${NODE}" --run-firewall=true --run-router=false --run-service-proxy=false \
    --run-loadbalancer=false --service-cluster-ip-range "${SERVICE_CIDR}" --health-port 0 \
    --metrics-port 0
  # Its chain for Pods no policy selects exists once it has started enforcing.
  wait_for "kube-router's network policy controller" 120 iptables -t filter -S KUBE-NWPLCY-DEFAULT
}

# install_packages: the Debian packages of the node (hack/e2e/deps.sh) and of its data servers
# (hack/deps.sh). On a fresh machine they are not there before this step, so nothing the script
# decides from the machine's state may be decided before it: resolve_host_paths comes after.
install_packages() {
  "${HACK}/deps.sh"
  "${HACK}/e2e/deps.sh"
}

# resolve_host_paths: sets CNI_BIN (the directory of the CNI plugins, /usr/lib/cni in Debian's
# package, /opt/cni/bin in upstream's tarballs) and PG_BINDIR (the newest PostgreSQL server's
# binaries) from what is installed now, and stops naming what is missing.
resolve_host_paths() {
  local d
  CNI_BIN=""
  for d in /usr/lib/cni /opt/cni/bin; do
    if [[ -x "${d}/bridge" ]]; then
      CNI_BIN="${d}"
      break
    fi
  done
  [[ -n "${CNI_BIN}" ]] || { log "no CNI bridge plugin in /usr/lib/cni or /opt/cni/bin (hack/e2e/deps.sh)"; exit 1; }
  # An unmatched glob stays literal and fails the initdb check.
  PG_BINDIR="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n1)"
  [[ -x "${PG_BINDIR}/initdb" ]] || { log "PostgreSQL server binaries not found (hack/deps.sh)"; exit 1; }
}

paths() {
  install_packages
  resolve_host_paths
  printf 'CNI_BIN=%q\nPG_BINDIR=%q\n' "${CNI_BIN}" "${PG_BINDIR}"
}

up() {
  [[ "$(id -u)" == 0 ]] || { log "needs root (containerd, network namespaces, iptables)"; exit 1; }
  [[ -d "${RUN}" ]] && down
  install_packages
  resolve_host_paths
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
  local kube etcd_dir ip images
  kube="$("${HACK}/e2e/kube.sh")"
  KUBE_ROUTER="$("${HACK}/e2e/kube-router.sh")"
  etcd_dir="$("${HACK}/envtest.sh")"
  KUBECTL="${kube}/kubectl"
  # The images' references are fixed by images.sh; it prints NAME=REF lines and the archives'
  # directory.
  images="$("${HACK}/e2e/images.sh" "${kube}")"
  eval "${images}"
  ip="$(node_ip)"
  [[ -n "${ip}" ]] || { log "no IPv4 address on the default route's device"; exit 1; }

  bridge_netfilter
  mkdir -p "${RUN}/logs" "${RUN}/pids" "${RUN}/pod-logs" "${STATE}"
  record_host_state
  echo "${ip}" >"${RUN}/node-ip"
  write_certs "${ip}"
  write_configs "${ip}"
  sysctl -qw net.ipv4.ip_forward=1
  sysctl -qw net.bridge.bridge-nf-call-iptables=1

  local t0=${SECONDS}
  start containerd containerd --config "${RUN}/containerd/config.toml"
  wait_for containerd 60 ctr --address "${RUN}/containerd/containerd.sock" version
  for archive in "${IMAGES_DIR}"/*.tar; do
    ctr --address "${RUN}/containerd/containerd.sock" -n "${NS}" images import --no-unpack=false \
      "${archive}" >/dev/null
  done

  start etcd "${etcd_dir}/etcd" --name "${NODE}" --data-dir "${RUN}/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "${NODE}=http://127.0.0.1:2380" --unsafe-no-fsync
  start kube-apiserver "${kube}/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --advertise-address "${ip}" --secure-port 6443 --kubelet-preferred-address-types InternalIP \
    --service-cluster-ip-range "${SERVICE_CIDR}" --authorization-mode Node,RBAC \
    --token-auth-file "${RUN}/pki/tokens.csv" --client-ca-file "${RUN}/pki/ca.crt" \
    --tls-cert-file "${RUN}/pki/apiserver.crt" --tls-private-key-file "${RUN}/pki/apiserver.key" \
    --kubelet-client-certificate "${RUN}/pki/kubelet-client.crt" \
    --kubelet-client-key "${RUN}/pki/kubelet-client.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "${RUN}/pki/sa.pub" \
    --service-account-signing-key-file "${RUN}/pki/sa.key" \
    --audit-policy-file "${RUN}/audit-policy.yaml" --audit-log-path "${RUN}/logs/audit.log"
  export KUBECONFIG="${RUN}/admin.kubeconfig"
  wait_for kube-apiserver 120 "${KUBECTL}" get --raw /readyz
  log "API server ready after $((SECONDS - t0))s"
  apply_policy_engine_rbac

  start kube-controller-manager "${kube}/kube-controller-manager" \
    --kubeconfig "${RUN}/controller-manager.kubeconfig" \
    --authentication-kubeconfig "${RUN}/controller-manager.kubeconfig" \
    --authorization-kubeconfig "${RUN}/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --service-cluster-ip-range "${SERVICE_CIDR}" --cluster-cidr "${POD_CIDR}" \
    --root-ca-file "${RUN}/pki/ca.crt" --service-account-private-key-file "${RUN}/pki/sa.key"
  start kube-scheduler "${kube}/kube-scheduler" --kubeconfig "${RUN}/scheduler.kubeconfig" \
    --authentication-kubeconfig "${RUN}/scheduler.kubeconfig" \
    --authorization-kubeconfig "${RUN}/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false
  start kubelet "${kube}/kubelet" --config "${RUN}/kubelet.yaml" \
    --kubeconfig "${RUN}/kubelet.kubeconfig" --root-dir "${RUN}/kubelet" \
    --hostname-override "${NODE}" --node-ip "${ip}"
  start kube-proxy "${kube}/kube-proxy" --config "${RUN}/kube-proxy.yaml"
  wait_for "node ${NODE}" 180 "${KUBECTL}" wait --for=condition=Ready "node/${NODE}" --timeout=5s
  log "node Ready after $((SECONDS - t0))s"
  # Before the first Pod: every Pod is subject to the policies that select it from its start.
  start_policy_engine
  log "NetworkPolicy engine enforcing after $((SECONDS - t0))s"
  # Every namespace's default ServiceAccount exists before the first Pod is created in it.
  wait_for "the default ServiceAccount" 60 "${KUBECTL}" -n default get serviceaccount default
  apply_dns
  wait_for CoreDNS 180 "${KUBECTL}" -n kube-system wait --for=condition=Available deployment/coredns \
    --timeout=5s
  log "CoreDNS Ready after $((SECONDS - t0))s"
  start_data "${ip}"
  exports | tee "${RUN}/exports"
}

# exports prints what the e2e test reads; up also keeps it in ${RUN}/exports, for another shell
# on a cluster left running (E2E_KEEP=1): eval "$(cat /run/codeport-e2e/exports)".
exports() {
  printf 'export KUBECONFIG=%q KUBECTL=%q E2E_AUDIT_LOG=%q E2E_IMAGE=%q E2E_NETCHECK_IMAGE=%q\n' \
    "${RUN}/admin.kubeconfig" "${KUBECTL}" "${RUN}/logs/audit.log" "${CODEPORT_IMAGE}" "${NETCHECK_IMAGE}"
  printf 'export E2E_DATABASE_URL=%q E2E_REDIS_URL=%q\n' "$(cat "${RUN}/database-url")" \
    "$(cat "${RUN}/redis-url")"
  # What TestDatabaseFailover runs CloudNativePG with, and where its local volumes go.
  printf 'export CNPG_VERSION=%q CNPG_MANIFEST=%q POSTGRES_IMAGE=%q PGBOUNCER_IMAGE=%q OBJECTSTORE_IMAGE=%q\n' \
    "${CNPG_VERSION}" "${CNPG_MANIFEST}" "${POSTGRES_IMAGE}" "${PGBOUNCER_IMAGE}" "${OBJECTSTORE_IMAGE}"
  printf 'export E2E_RUN_DIR=%q\n' "${RUN}"
}

# start_data starts PostgreSQL and Redis on the node's address, each with a password of the run.
start_data() {
  local ip="$1" bindir="${PG_BINDIR}" pass data
  pass="$(openssl rand -hex 16)"
  data="${RUN}/postgres"
  mkdir -p "${data}"
  chown postgres "${data}"
  printf '%s\n' "${pass}" >"${RUN}/pg-pass"
  chown postgres "${RUN}/pg-pass"
  runuser -u postgres -- "${bindir}/initdb" -D "${data}" -U postgres --auth-local=trust \
    --auth-host=scram-sha-256 --pwfile="${RUN}/pg-pass" -E UTF8 --no-instructions >/dev/null
  echo "host all all ${POD_CIDR} scram-sha-256" >>"${data}/pg_hba.conf"
  echo "host all all ${ip}/32 scram-sha-256" >>"${data}/pg_hba.conf"
  touch "${RUN}/logs/postgres.log"
  chown postgres "${RUN}/logs/postgres.log"
  runuser -u postgres -- "${bindir}/pg_ctl" -D "${data}" -l "${RUN}/logs/postgres.log" -w -t 60 \
    -o "-h ${ip} -p ${PG_PORT} -k ${data} -c max_connections=200 -c fsync=off" start >/dev/null
  head -n1 "${data}/postmaster.pid" >"${RUN}/pids/postgres"
  runuser -u postgres -- psql -h "${data}" -p "${PG_PORT}" -qc 'CREATE DATABASE codeport' >/dev/null
  echo "postgres://postgres:${pass}@${ip}:${PG_PORT}/codeport?sslmode=disable" >"${RUN}/database-url"

  pass="$(openssl rand -hex 16)"
  mkdir -p "${RUN}/redis"
  redis-server --bind "${ip}" --port "${REDIS_PORT}" --requirepass "${pass}" --save '' \
    --appendonly no --dir "${RUN}/redis" --logfile "${RUN}/logs/redis.log" \
    --pidfile "${RUN}/pids/redis" --daemonize yes >/dev/null
  echo "redis://:${pass}@${ip}:${REDIS_PORT}/0" >"${RUN}/redis-url"
  wait_for Redis 30 redis-cli -u "$(cat "${RUN}/redis-url")" ping
}

# kill_pids: every process up recorded, kubelet first so that it restarts nothing.
kill_pids() {
  local name pid sig
  for name in kubelet kube-router kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd \
    postgres redis; do
    [[ -f "${RUN}/pids/${name}" ]] || continue
    pid="$(cat "${RUN}/pids/${name}")"
    # PostgreSQL's fast shutdown is SIGINT; SIGTERM would wait for every client to leave.
    sig=TERM
    [[ "${name}" == postgres ]] && sig=INT
    if kill -s "${sig}" "${pid}" 2>/dev/null; then
      for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.2; done
      kill -9 "${pid}" 2>/dev/null || true
    fi
    rm -f "${RUN}/pids/${name}"
  done
}

# remove_containers: every task, container and sandbox network namespace of the node.
remove_containers() {
  local sock="${RUN}/containerd/containerd.sock" id
  [[ -S "${sock}" ]] || return 0
  for id in $(ctr --address "${sock}" -n "${NS}" tasks ls -q 2>/dev/null); do
    ctr --address "${sock}" -n "${NS}" tasks kill -s SIGKILL "${id}" >/dev/null 2>&1 || true
  done
  for id in $(ctr --address "${sock}" -n "${NS}" tasks ls -q 2>/dev/null); do
    for _ in $(seq 1 20); do
      ctr --address "${sock}" -n "${NS}" tasks delete "${id}" >/dev/null 2>&1 && break
      sleep 0.2
    done
  done
  for id in $(ctr --address "${sock}" -n "${NS}" containers ls -q 2>/dev/null); do
    ctr --address "${sock}" -n "${NS}" containers delete "${id}" >/dev/null 2>&1 || true
  done
  local pid
  pid="$(cat "${RUN}/pids/containerd" 2>/dev/null || true)"
  if [[ -n "${pid}" ]] && kill "${pid}" 2>/dev/null; then
    for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.2; done
    kill -9 "${pid}" 2>/dev/null || true
  fi
  rm -f "${RUN}/pids/containerd"
}

# Unmounts every mount under a directory, deepest first.
unmount_under() {
  local m
  awk -v d="$1/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r | while read -r m; do
    umount -l "${m}" 2>/dev/null || true
  done
}

remove_chains() {
  local t c rule
  for t in filter nat mangle; do
    # The chains that were not there before up.
    comm -13 "${RUN}/before/chains-${t}" <(chains "${t}") >"${RUN}/chains-${t}.new" || true
    [[ -s "${RUN}/chains-${t}.new" ]] || continue
    # First the rules that jump into them from any other chain, then the chains.
    # iptables -S quotes the rules' words as a shell would (comments have spaces): eval reads
    # them back.
    iptables -t "${t}" -S | { grep -F -f <(sed 's/.*/-j &/' "${RUN}/chains-${t}.new") || true; } |
      { grep -v -E '^-N ' || true; } | while read -r rule; do
        eval "iptables -t ${t} ${rule/-A /-D }" 2>/dev/null || true
      done
    while read -r c; do iptables -t "${t}" -F "${c}" 2>/dev/null || true; done <"${RUN}/chains-${t}.new"
    while read -r c; do iptables -t "${t}" -X "${c}" 2>/dev/null || true; done <"${RUN}/chains-${t}.new"
  done
}

# remove_ipsets: the sets that were not there before up (the policy engine's); once no rule
# refers to them, after remove_chains.
remove_ipsets() {
  local set
  command -v ipset >/dev/null 2>&1 && [[ -f "${RUN}/before/ipsets" ]] || return 0
  comm -13 "${RUN}/before/ipsets" <(ipset list -n 2>/dev/null | sort) | while read -r set; do
    ipset destroy "${set}" 2>/dev/null || log "ipset ${set} still in use; left in place"
  done
}

remove_cgroups() {
  local d
  while read -r d; do
    grep -qxF "${d}" "${RUN}/before/cgroups" 2>/dev/null && continue
    # Children before parents; a cgroup with a process left in it stays (and is reported).
    find "${d}" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    if [[ -d "${d}" ]]; then log "cgroup ${d} still has processes; left in place"; fi
  done < <(find /sys/fs/cgroup -maxdepth 2 -name kubepods -type d 2>/dev/null)
}

down() {
  [[ -d "${RUN}" ]] || return 0
  log "stopping the cluster and removing what it created"
  kill_pids
  remove_containers
  # Network namespaces the sandboxes left (not there before up).
  local n
  for n in /run/netns/*; do
    [[ -e "${n}" ]] || continue
    grep -qxF "$(basename "${n}")" "${RUN}/before/netns" 2>/dev/null && continue
    umount "${n}" 2>/dev/null || true
    rm -f "${n}"
  done
  unmount_under "${RUN}"
  if [[ ! -s "${RUN}/before/bridge" ]] && ip link show "${BRIDGE}" >/dev/null 2>&1; then
    ip link delete "${BRIDGE}"
  fi
  remove_chains
  remove_ipsets
  remove_cgroups
  for p in /run/netns /var/lib/cni; do
    grep -qxF "${p}" "${RUN}/before/paths" 2>/dev/null || rm -rf "${p}"
  done
  if [[ -s "${RUN}/before/ip_forward" ]]; then
    sysctl -qw "net.ipv4.ip_forward=$(cat "${RUN}/before/ip_forward")"
  fi
  if [[ -s "${RUN}/before/bridge_nf_call_iptables" ]]; then
    sysctl -qw "net.bridge.bridge-nf-call-iptables=$(cat "${RUN}/before/bridge_nf_call_iptables")"
  fi
  rm -rf "${RUN}"
}

STATE="${XDG_CACHE_HOME:-$HOME/.cache}/codeport/e2e"
# Resolved by resolve_host_paths and images.sh, once what they read is installed or built.
CNI_BIN="" PG_BINDIR="" KUBE_ROUTER=""
PAUSE_IMAGE="" COREDNS_IMAGE="" NETCHECK_IMAGE="" IMAGES_DIR="" KUBECTL=""
CNPG_VERSION="" CNPG_MANIFEST="" POSTGRES_IMAGE="" PGBOUNCER_IMAGE="" OBJECTSTORE_IMAGE=""

case "${1:-}" in
up) up ;;
down) down ;;
paths) paths ;;
*)
  echo "usage: $0 up|down|paths" >&2
  exit 2
  ;;
esac
