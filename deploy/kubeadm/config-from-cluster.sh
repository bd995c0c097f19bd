#!/bin/sh
# Writes this control-plane node's kubeadm configuration for adding cborgate to
# an EXISTING cluster, from the cluster's own ClusterConfiguration (the
# kubeadm-config ConfigMap, as kubeadm's "Reconfiguring a kubeadm cluster"
# does), never from a sample: the ClusterConfiguration is copied byte for byte,
# so certSANs, controlPlaneEndpoint, the service range, OIDC, audit, encryption
# and external-etcd flags all stay. Only an InitConfiguration for this node is
# put in front of it: this node's advertise address and port (read from the
# manifest kubeadm wrote, so they do not change) and patches.directory
# (`--config` and `--patches` cannot be mixed on `kubeadm init phase`).
#
#   sh deploy/kubeadm/config-from-cluster.sh > kubeadm-cborgate.yaml
#
# Options (defaults in brackets):
#   --cluster-config FILE  the ClusterConfiguration text [kubectl -n kube-system
#                          get cm kubeadm-config -o jsonpath='{.data.ClusterConfiguration}'
#                          with --kubeconfig /etc/kubernetes/admin.conf]
#   --manifest FILE        this node's apiserver manifest
#                          [/etc/kubernetes/manifests/kube-apiserver.yaml]
#   --patches DIR          cborgate's patches [/etc/kubernetes/cborgate/patches]
#   --node-name NAME       nodeRegistration.name [not set: kubeadm's default, the hostname]
#
# Refuses, with one line on stderr and exit status 1, a ClusterConfiguration
# whose certSANs lack 127.0.0.1 (cborgate verifies the apiserver at
# https://127.0.0.1:6443; add it to kubeadm-config first, deploy/README.md) or
# that sets bind-address (the loopback bind belongs in the per-node patch only).
set -eu

cluster_config="" manifest=/etc/kubernetes/manifests/kube-apiserver.yaml
patches=/etc/kubernetes/cborgate/patches node_name=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster-config) cluster_config=$2; shift 2 ;;
    --manifest) manifest=$2; shift 2 ;;
    --patches) patches=$2; shift 2 ;;
    --node-name) node_name=$2; shift 2 ;;
    *) echo "config-from-cluster.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done

die() { echo "config-from-cluster.sh: $*" >&2; exit 1; }

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if [ -n "$cluster_config" ]; then
  cat "$cluster_config" >"$tmp" || die "cannot read $cluster_config"
else
  kubectl --kubeconfig /etc/kubernetes/admin.conf -n kube-system get cm kubeadm-config \
    -o jsonpath='{.data.ClusterConfiguration}' >"$tmp" \
    || die "cannot read the kubeadm-config ConfigMap (kubectl -n kube-system get cm kubeadm-config)"
fi
grep -q '^kind: *ClusterConfiguration *$' "$tmp" || die "no ClusterConfiguration in the kubeadm-config ConfigMap"
api_version=$(sed -n 's/^apiVersion: *\(kubeadm\.k8s\.io\/v1beta[0-9]*\) *$/\1/p' "$tmp" | head -n 1)
case "$api_version" in
  kubeadm.k8s.io/v1beta3|kubeadm.k8s.io/v1beta4) ;;
  *) die "ClusterConfiguration apiVersion '$api_version': kubeadm.k8s.io/v1beta3 or v1beta4 expected (kubeadm 1.22 and later)" ;;
esac
grep -q -- 'bind-address' "$tmp" \
  && die "the ClusterConfiguration sets bind-address: remove it from apiServer.extraArgs in kubeadm-config (cborgate's per-node patch sets the loopback bind)"
# certSANs is a list of plain strings; 127.0.0.1 as one of its items, quoted or not.
grep -Eq "^ *- *[\"']?127\.0\.0\.1[\"']? *\$" "$tmp" \
  || die "apiServer.certSANs in kubeadm-config lacks 127.0.0.1 (kubectl -n kube-system edit cm kubeadm-config; deploy/README.md, \"An existing cluster\")"

[ -r "$manifest" ] || die "cannot read $manifest (this node's kube-apiserver manifest)"
# kubeadm writes the advertise endpoint into this annotation: IP:PORT, [IPv6]:PORT.
endpoint=$(sed -n 's/^ *kubeadm\.kubernetes\.io\/kube-apiserver\.advertise-address\.endpoint: *\(.*\)$/\1/p' "$manifest" | tr -d "\"' " | head -n 1)
[ -n "$endpoint" ] || die "$manifest has no kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint annotation (not written by kubeadm?)"
port=${endpoint##*:}
address=${endpoint%:*}
address=${address#[}
address=${address%]}
case "$port" in ''|*[!0-9]*) die "cannot read the port of '$endpoint' in $manifest" ;; esac
[ -n "$address" ] || die "cannot read the address of '$endpoint' in $manifest"

printf '# Written by deploy/kubeadm/config-from-cluster.sh from the cluster'"'"'s kubeadm-config\n'
printf '# and %s. Use only on this node.\n' "$manifest"
printf 'apiVersion: %s\nkind: InitConfiguration\n' "$api_version"
printf 'localAPIEndpoint:\n  advertiseAddress: "%s"\n  bindPort: %s\n' "$address" "$port"
if [ -n "$node_name" ]; then
  printf 'nodeRegistration:\n  name: "%s"\n' "$node_name"
fi
printf 'patches:\n  directory: %s\n---\n' "$patches"
cat "$tmp"
[ -z "$(tail -c 1 "$tmp")" ] || echo
