# Source this file to use the project's Pulumi engine by hand:   . ./env.sh
# Every value can be overridden by setting it before sourcing.
_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export PATH="$_root/.tools/bin:$_root/.venv/bin:$PATH"
# Local state inside the project (git-ignored); no Pulumi Cloud account needed.
# metadata=skip: no `.attrs` sidecar files, which the file backend rewrites in place
# (truncate, then write): the program's reference to its own stack, read while the
# engine saves a checkpoint, could find one empty ("failed to load checkpoint: EOF").
export PULUMI_BACKEND_URL="${PULUMI_BACKEND_URL:-file://$_root/.pulumi-state?metadata=skip}"
export PULUMI_HOME="${PULUMI_HOME:-$_root/.tools/pulumi-home}"
# The passphrase secrets provider. This default is for local development only:
# set your own PULUMI_CONFIG_PASSPHRASE (or _FILE) for anything that matters.
if [ -z "${PULUMI_CONFIG_PASSPHRASE+x}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  export PULUMI_CONFIG_PASSPHRASE="mirrorstack-dev-only"
fi
# Never reach out: no update checks, no plugin downloads (the docker and
# kubernetes platforms need theirs installed by `make plugins`; the program says so).
export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
# The language host built here (sdk v3.79) does not read Pulumi.yaml's
# `virtualenv` option, so name the interpreter for it and for dynamic providers.
export PULUMI_PYTHON_CMD="${PULUMI_PYTHON_CMD:-$_root/.venv/bin/python}"
_state="${PULUMI_BACKEND_URL#file://}"
mkdir -p "$PULUMI_HOME" "${_state%%\?*}"
unset _state
unset _root
