"""What starting the cluster changes on the host, recorded before and put
back by stop: the sysctls a kubelet and kube-proxy rewrite, the pods'
bridge, the chain that lets bridged pod traffic through Docker's FORWARD
policy, KUBE-* chains (kube-proxy --cleanup), mounts and cgroups under the
cluster's folders, the pods' network namespaces."""
from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from tools.kube import layout

# What a kubelet sets at start (it cannot be told not to) and what kube-proxy and
# the bridge plugin may set; recorded when readable, put back when changed.
SYSCTLS = ("kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
           "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
           "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
           "net/ipv4/conf/all/route_localnet", "net/netfilter/nf_conntrack_max",
           "net/netfilter/nf_conntrack_tcp_timeout_established", "net/netfilter/nf_conntrack_tcp_timeout_close_wait")
FORWARD_CHAIN = "MIRRORSTACK-KUBE-FORWARD"
IPTABLES = ("iptables", "ip6tables")
TABLES = ("filter", "nat", "mangle", "raw")


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"kube: `{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()}")
    return done


def read_sysctls() -> dict[str, str]:
    values = {}
    for key in SYSCTLS:
        path = Path("/proc/sys") / key
        if path.exists():
            values[key] = path.read_text().strip()
    return values


def record() -> dict:
    """Before the first start only: a later start keeps the first record (the
    host as it was before any cluster ran)."""
    if layout.HOST_STATE.exists():
        return json.loads(layout.HOST_STATE.read_text())
    state = {"sysctls": read_sysctls(), "bridge_existed": bridge_exists(), "made": [],
             "chains": {command: chains(command) for command in IPTABLES}}
    layout.HOST_STATE.parent.mkdir(parents=True, exist_ok=True)
    layout.HOST_STATE.write_text(json.dumps(state, indent=2))
    return state


def _note(state: dict, what: str) -> None:
    if what not in state["made"]:
        state["made"].append(what)
        layout.HOST_STATE.write_text(json.dumps(state, indent=2))


def bridge_exists() -> bool:
    return Path(f"/sys/class/net/{layout.BRIDGE}").exists()


def check_addresses_free() -> None:
    """The pods' and services' ranges must not be routed anywhere else on this host."""
    routes = run("ip", "-4", "route", "show").stdout.splitlines()
    for line in routes:
        if layout.BRIDGE in line:
            continue
        destination = line.split()[0]
        for ours in (layout.POD_CIDR, layout.SERVICE_CIDR):
            if destination == ours or destination.startswith(ours.rsplit(".", 2)[0] + "."):
                raise SystemExit(f"kube: {ours} is already routed on this host ({line.strip()}); "
                                 f"the cluster's ranges are in tools/kube/layout.py")


def prepare(state: dict) -> None:
    """The bridge (the API server binds its address before any pod exists) and
    the FORWARD exception for it; br_netfilter so Services work between pods."""
    if not bridge_exists():
        run("ip", "link", "add", layout.BRIDGE, "type", "bridge")
        _note(state, "bridge")
    prefix = layout.POD_CIDR.split("/")[1]
    if f"{layout.GATEWAY}/" not in run("ip", "-4", "addr", "show", "dev", layout.BRIDGE).stdout:
        run("ip", "addr", "add", f"{layout.GATEWAY}/{prefix}", "dev", layout.BRIDGE)
    run("ip", "link", "set", layout.BRIDGE, "up")
    if run("iptables", "-w", "-n", "-L", FORWARD_CHAIN, check=False).returncode != 0:
        run("iptables", "-w", "-N", FORWARD_CHAIN)
        run("iptables", "-w", "-A", FORWARD_CHAIN, "-i", layout.BRIDGE, "-j", "ACCEPT")
        run("iptables", "-w", "-A", FORWARD_CHAIN, "-o", layout.BRIDGE, "-j", "ACCEPT")
        _note(state, "forward-chain")
    if run("iptables", "-w", "-C", "FORWARD", "-j", FORWARD_CHAIN, check=False).returncode != 0:
        run("iptables", "-w", "-I", "FORWARD", "1", "-j", FORWARD_CHAIN)
    if not Path("/proc/sys/net/bridge").exists():
        run("modprobe", "br_netfilter", check=False)
    for key, value in (("net/bridge/bridge-nf-call-iptables", "1"), ("net/ipv4/ip_forward", "1")):
        path = Path("/proc/sys") / key
        if path.exists() and path.read_text().strip() != value:
            path.write_text(value)


def restore(state: dict) -> list[str]:
    """Put back what start changed; what could not be, named."""
    problems = []
    if "forward-chain" in state["made"]:
        while run("iptables", "-w", "-D", "FORWARD", "-j", FORWARD_CHAIN, check=False).returncode == 0:
            pass
        run("iptables", "-w", "-F", FORWARD_CHAIN, check=False)
        if run("iptables", "-w", "-X", FORWARD_CHAIN, check=False).returncode != 0:
            problems.append(f"iptables chain {FORWARD_CHAIN} could not be removed")
    if "bridge" in state["made"] and bridge_exists():
        if run("ip", "link", "delete", layout.BRIDGE, check=False).returncode != 0:
            problems.append(f"bridge {layout.BRIDGE} could not be removed")
    for key, value in state["sysctls"].items():
        path = Path("/proc/sys") / key
        try:
            if path.exists() and path.read_text().strip() != value:
                path.write_text(value)
        except OSError as error:
            problems.append(f"sysctl {key.replace('/', '.')} not restored to {value}: {error}")
    return problems


def chains(command: str) -> dict[str, list[str]]:
    """table → the chains that exist (iptables-save's `:CHAIN` lines)."""
    found = {}
    for table in TABLES:
        dump = run(f"{command}-save", "-t", table, check=False).stdout.splitlines()
        found[table] = [line[1:].split()[0] for line in dump if line.startswith(":")]
    return found


def remove_kube_chains(before: dict[str, dict[str, list[str]]]) -> list[str]:
    """The KUBE-* chains a kubelet and kube-proxy made (kube-proxy --cleanup
    leaves the kubelet's: KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT),
    with the rules of other chains that jump to them; those that existed
    before the first start are left alone."""
    problems = []
    for command in IPTABLES:
        for table in TABLES:
            existed = set(before.get(command, {}).get(table, []))
            dump = run(f"{command}-save", "-t", table, check=False).stdout.splitlines()
            new = {line[1:].split()[0] for line in dump if line.startswith(":KUBE-")} - existed
            if not new:
                continue
            for line in dump:  # jumps into a new chain from a chain that stays
                words = line.split()
                if line.startswith("-A ") and words[1] not in new and any(
                        words[i] in ("-j", "-g") and words[i + 1] in new for i in range(len(words) - 1)):
                    run(command, "-w", "-t", table, "-D", *shlex.split(line[3:]), check=False)
            for chain in new:
                run(command, "-w", "-t", table, "-F", chain, check=False)
            for chain in new:
                if run(command, "-w", "-t", table, "-X", chain, check=False).returncode != 0:
                    problems.append(f"{command} chain {chain} ({table}) could not be removed")
    return problems


def unmount_under(*folders: Path) -> list[str]:
    """Unmount everything mounted below the folders (deepest first): the
    kubelet's volumes, containerd's rootfs and shm mounts."""
    problems = []
    roots = [str(f.resolve()) + "/" for f in folders]
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for target in sorted({m for m in mounts if any(m.startswith(r) for r in roots)}, key=len, reverse=True):
        if run("umount", target, check=False).returncode != 0 and run("umount", "-l", target, check=False).returncode != 0:
            problems.append(f"mount {target} could not be unmounted")
    return problems


def remove_pod_netns(namespaces: list[str]) -> None:
    for name in namespaces:
        run("ip", "netns", "delete", name, check=False)


def remove_pod_cgroups() -> list[str]:
    """The kubelet's cgroups (kubepods and below), leaves first; the pods' processes are gone by now."""
    problems = []
    for controller in Path("/sys/fs/cgroup").iterdir():
        top = controller / "kubepods"
        if not top.is_dir():
            continue
        for folder in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            try:
                folder.rmdir()
            except OSError:
                pass
        try:
            top.rmdir()
        except OSError as error:
            problems.append(f"cgroup {top} could not be removed: {error}")
    return problems


def iptables_rules() -> dict[str, list[str]]:
    """Every table's chains and rules without counters (for before/after comparisons)."""
    tables = {}
    for table in ("filter", "nat", "mangle", "raw"):
        dump = run("iptables-save", "-t", table, check=False).stdout.splitlines()
        tables[table] = sorted(line.split(" [")[0] if line.startswith(":") else line
                               for line in dump if line and not line.startswith(("#", "*", "COMMIT")))
    return tables
