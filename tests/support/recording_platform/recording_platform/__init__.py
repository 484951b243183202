"""The `recording` platform: registered by name, with what it can do, and its
factory by reference, so reading the registry imports no Pulumi."""
from mirrorstack.model.capabilities import Capabilities, register_platform

# Nothing it runs needs an image or a scheduler; the validation job is recorded, not run.
CAPABILITIES = Capabilities(node_ports=False, scheduled_jobs=False, uploads_files=True, runs_containers=False)


def register() -> None:
    register_platform("recording", CAPABILITIES, "recording_platform.platform:make")
