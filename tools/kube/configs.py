"""Each piece of the cluster: its command line and the files it reads. Pure:
paths and addresses from layout, nothing started here."""
from __future__ import annotations

import json

from tools.kube import layout
from tools.kube.pki import kubeconfig_path

PKI = layout.PKI


def containerd_config() -> str:
    """Its own root, state and sockets (never Docker's containerd); the CRI
    plugin as this machine needs it: root cannot lower oom_score_adj here
    (restrict_oom_score_adj), cgroupfs (cgroup v1), the pause image imported
    locally, CNI configuration in the cluster's own folder."""
    run = layout.RUN / "containerd"
    return f"""version = 2
root = "{layout.DATA / 'containerd'}"
state = "{run / 'state'}"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
                    "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{layout.CONTAINERD_SOCKET}"
[ttrpc]
  address = "{run / 'containerd.sock.ttrpc'}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{layout.PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{run / 'runc'}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{layout.DATA / 'cni' / 'net.d'}"
"""


def cni_config() -> str:
    """The pods' bridge (made by the tool, reused by the plugin) and their addresses."""
    return json.dumps({
        "cniVersion": "1.0.0", "name": "mirrorstack-kube",
        "plugins": [
            {"type": "bridge", "bridge": layout.BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": layout.POD_CIDR, "gateway": layout.GATEWAY}]],
                      "dataDir": str(layout.DATA / "cni" / "ipam"), "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
            {"type": "loopback"},
        ],
    }, indent=2)


def etcd_argv() -> list[str]:
    return [layout.binary("etcd"), "--name", "mirrorstack-kube", "--data-dir", str(layout.DATA / "etcd"),
            "--listen-client-urls", f"http://{layout.ETCD_CLIENT}", "--advertise-client-urls", f"http://{layout.ETCD_CLIENT}",
            "--listen-peer-urls", f"http://{layout.ETCD_PEER}", "--initial-advertise-peer-urls", f"http://{layout.ETCD_PEER}",
            "--initial-cluster", f"mirrorstack-kube=http://{layout.ETCD_PEER}", "--listen-metrics-urls", "",
            "--quota-backend-bytes", str(2 * 1024 ** 3), "--log-level", "warn"]


def apiserver_argv() -> list[str]:
    """RBAC and the Node authorizer, as a real cluster: the program and the
    job get only the rights the docs tell users to grant."""
    return [layout.binary("kube-apiserver"), f"--etcd-servers=http://{layout.ETCD_CLIENT}",
            f"--bind-address={layout.GATEWAY}", f"--advertise-address={layout.GATEWAY}",
            f"--secure-port={layout.API_PORT}", f"--service-cluster-ip-range={layout.SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            f"--client-ca-file={PKI / 'ca.crt'}", f"--tls-cert-file={PKI / 'apiserver.crt'}",
            f"--tls-private-key-file={PKI / 'apiserver.key'}",
            f"--kubelet-client-certificate={PKI / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={PKI / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={PKI / 'ca.crt'}", "--kubelet-preferred-address-types=InternalIP",
            f"--service-account-key-file={PKI / 'sa.pub'}", f"--service-account-signing-key-file={PKI / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            # Pods get their node's zone label when bound (KEP-4742: beta and on from 1.35),
            # which the kubernetes platform's brokers read as broker.rack.
            "--feature-gates=PodTopologyLabelsAdmission=true",
            "--enable-admission-plugins=NodeRestriction,PodTopologyLabels", "--profiling=false", "--v=1"]


def controller_manager_argv() -> list[str]:
    return [layout.binary("kube-controller-manager"), f"--kubeconfig={kubeconfig_path('controller-manager')}",
            f"--authentication-kubeconfig={kubeconfig_path('controller-manager')}",
            f"--authorization-kubeconfig={kubeconfig_path('controller-manager')}",
            "--bind-address=127.0.0.1", f"--secure-port={layout.CONTROLLER_MANAGER_PORT}", "--leader-elect=false",
            f"--service-account-private-key-file={PKI / 'sa.key'}", f"--root-ca-file={PKI / 'ca.crt'}",
            "--use-service-account-credentials=true", f"--service-cluster-ip-range={layout.SERVICE_CIDR}",
            f"--cluster-signing-cert-file={PKI / 'ca.crt'}", f"--cluster-signing-key-file={PKI / 'ca.key'}",
            "--controllers=*,-nodeipam,-cloud-node-lifecycle", "--profiling=false", "--v=1"]


def scheduler_argv() -> list[str]:
    return [layout.binary("kube-scheduler"), f"--kubeconfig={kubeconfig_path('scheduler')}",
            f"--authentication-kubeconfig={kubeconfig_path('scheduler')}",
            f"--authorization-kubeconfig={kubeconfig_path('scheduler')}",
            "--bind-address=127.0.0.1", f"--secure-port={layout.SCHEDULER_PORT}", "--leader-elect=false", "--profiling=false", "--v=1"]


def kubelet_config() -> str:
    """cgroupfs on cgroup v1 (failCgroupV1: false), swap tolerated, CoreDNS as
    the pods' resolver, evictions only when the disk is truly full (a shared
    build machine's disk is busy, not full), serving on the bridge address."""
    return json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": layout.GATEWAY, "port": 10250, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": layout.KUBELET_HEALTHZ_PORT,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(PKI / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(PKI / "kubelet-serving.crt"), "tlsPrivateKeyFile": str(PKI / "kubelet-serving.key"),
        "cgroupDriver": "cgroupfs", "failSwapOn": False, "failCgroupV1": False,
        "clusterDNS": [layout.DNS_SERVICE_IP], "clusterDomain": "cluster.local",
        "containerRuntimeEndpoint": f"unix://{layout.CONTAINERD_SOCKET}",
        "resolvConf": str(layout.DATA / "kubelet-resolv.conf"),
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False, "maxPods": 60, "enableDebuggingHandlers": True,
        "staticPodPath": "", "rotateCertificates": False, "serverTLSBootstrap": False,
    }, indent=2)


def kubelet_argv() -> list[str]:
    return [layout.binary("kubelet"), f"--config={layout.DATA / 'kubelet-config.json'}",
            f"--kubeconfig={kubeconfig_path('kubelet')}", f"--root-dir={layout.DATA / 'kubelet'}",
            f"--hostname-override={layout.NODE}", f"--node-ip={layout.GATEWAY}",
            f"--node-labels=topology.kubernetes.io/zone={layout.ZONE}", "--v=1"]


def proxy_config() -> str:
    """iptables mode; no conntrack sysctl touched (all zero: leave the host's);
    NodePorts only on the bridge address."""
    return json.dumps({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path("proxy"))},
        "mode": "iptables", "clusterCIDR": layout.POD_CIDR, "hostnameOverride": layout.NODE,
        "bindAddress": "127.0.0.1", "healthzBindAddress": f"127.0.0.1:{layout.PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{layout.PROXY_METRICS_PORT}",
        "nodePortAddresses": [f"{layout.GATEWAY}/32"],
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }, indent=2)


def proxy_argv() -> list[str]:
    return [layout.binary("kube-proxy"), f"--config={layout.DATA / 'kube-proxy.json'}", "--v=1"]


def coredns_manifests() -> str:
    """CoreDNS behind the cluster DNS address, answering cluster names only:
    nothing forwarded off the machine."""
    corefile = ".:53 {\n    errors\n    health :8080\n    ready :8181\n"\
               "    kubernetes cluster.local in-addr.arpa ip6.arpa {\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }\n"\
               "    cache 30\n    loop\n    reload\n}\n"
    docs = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:coredns"},
         "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "system:coredns"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
         "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": "kube-system"},
         "data": {"Corefile": corefile}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "coredns", "namespace": "kube-system"},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                  "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}}, "spec": {
                      "serviceAccountName": "coredns", "dnsPolicy": "Default",
                      "containers": [{"name": "coredns", "image": layout.coredns_image(), "imagePullPolicy": "Never",
                                      "args": ["-conf", "/etc/coredns/Corefile"],
                                      "ports": [{"containerPort": 53, "protocol": "UDP", "name": "dns"},
                                                {"containerPort": 53, "protocol": "TCP", "name": "dns-tcp"}],
                                      "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}},
                                      "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}},
                                      "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns"}]}],
                      "volumes": [{"name": "config", "configMap": {"name": "coredns"}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kube-dns", "namespace": "kube-system",
                                                             "labels": {"k8s-app": "kube-dns"}},
         "spec": {"clusterIP": layout.DNS_SERVICE_IP, "selector": {"k8s-app": "kube-dns"},
                  "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}},
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})


def local_path_manifests() -> str:
    """The default StorageClass: rancher's local-path provisioner makes a
    folder under layout.VOLUMES for each volume claimed (with a helper pod of
    the busybox image) and removes it when the claim goes (reclaim Delete)."""
    ns = "local-path-storage"
    account = "local-path-provisioner-service-account"
    scripts = {
        "config.json": json.dumps({"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES",
                                                    "paths": [str(layout.VOLUMES)]}]}),
        "setup": "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
        "teardown": "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
        "helperPod.yaml": json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "helper-pod"},
                                      "spec": {"containers": [{"name": "helper-pod", "image": layout.HELPER_IMAGE,
                                                               "imagePullPolicy": "IfNotPresent"}]}}),
    }
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "local-path-provisioner", "namespace": ns},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "local-path-provisioner"},
         "rules": [{"apiGroups": [""], "resources": ["nodes", "persistentvolumeclaims", "configmaps", "pods", "pods/log"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]},
                   {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
                   {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "local-path-provisioner", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "local-path-provisioner"},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "local-path-provisioner"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "local-path-provisioner"},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "local-path-config", "namespace": ns}, "data": scripts},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "local-path-provisioner", "namespace": ns},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "local-path-provisioner"}},
                  "template": {"metadata": {"labels": {"app": "local-path-provisioner"}}, "spec": {
                      "serviceAccountName": account,
                      "containers": [{"name": "provisioner", "image": layout.local_path_image(), "imagePullPolicy": "Never",
                                      "command": ["/local-path-provisioner", "start", "--config", "/etc/config/config.json",
                                                  "--service-account-name", account, "--helper-image", layout.HELPER_IMAGE,
                                                  "--configmap-name", "local-path-config"],
                                      "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                                              {"name": "CONFIG_MOUNT_PATH", "value": "/etc/config/"}],
                                      "volumeMounts": [{"name": "config", "mountPath": "/etc/config/"}]}],
                      "volumes": [{"name": "config", "configMap": {"name": "local-path-config"}}]}}}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": layout.STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
         "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"},
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
