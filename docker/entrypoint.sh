#!/usr/bin/env bash
# The image's entrypoint.
#   docker run IMAGE train --config ...   runs `kiln train --config ...` (any kiln subcommand/option)
#   docker run IMAGE bash                 runs a program of the image by name
#   docker run IMAGE                      starts JupyterLab and sshd and waits for them
# Credentials come from the environment or from mounted files; nothing is built in:
#   JupyterLab  JUPYTER_TOKEN or JUPYTER_TOKEN_FILE (default /run/secrets/jupyter_token), and/or
#               JUPYTER_PASSWORD or JUPYTER_PASSWORD_FILE (default /run/secrets/jupyter_password).
#               With neither, a random token is made and printed (as `jupyter lab` itself does).
#   sshd        SSH_AUTHORIZED_KEYS (the keys' text) or SSH_AUTHORIZED_KEYS_FILE (default
#               /run/secrets/authorized_keys); public keys only, password logins are refused.
#               With no key, sshd is not started (and the log says so).
# Ports inside the container: JUPYTER_PORT (8888), SSH_PORT (2222: sshd runs as the image's
# non-root user, which cannot listen below 1024).
set -euo pipefail

if (($#)); then
  # A program of the image by name; anything else (a subcommand, an option) goes to kiln.
  if [[ $1 != -* ]] && type -P "$1" > /dev/null; then exec "$@"; fi
  exec kiln "$@"
fi

log() { echo "kiln-entrypoint: $*"; }

# secret NAME DEFAULT_FILE: the value of $NAME, else the contents of the file $NAME_FILE names,
# else of DEFAULT_FILE when it exists, else empty. A named file that cannot be read is an error.
secret() {
  local name=$1 default_file=$2 file_var="${1}_FILE"
  if [[ -n ${!name:-} ]]; then printf '%s' "${!name}"; return; fi
  local file=${!file_var:-}
  if [[ -n $file ]]; then
    [[ -r $file ]] || { echo "kiln-entrypoint: $file_var=$file is not a readable file" >&2; exit 2; }
  elif [[ -r $default_file ]]; then
    file=$default_file
  else
    return 0
  fi
  # Trailing newlines of a file are not part of the secret.
  printf '%s' "$(< "$file")"
}

start_sshd() {
  local keys
  keys=$(secret SSH_AUTHORIZED_KEYS /run/secrets/authorized_keys)
  if [[ -z $keys ]]; then
    log "sshd not started: no public key given (SSH_AUTHORIZED_KEYS or SSH_AUTHORIZED_KEYS_FILE)"
    return 0
  fi
  local dir=$HOME/.sshd port=${SSH_PORT:-2222}
  mkdir -p "$dir" "$HOME/.ssh"
  chmod 700 "$dir" "$HOME/.ssh"
  printf '%s\n' "$keys" > "$HOME/.ssh/authorized_keys"
  chmod 600 "$HOME/.ssh/authorized_keys"
  # A host key per container (kept while the container exists): the fingerprint is printed
  # below for the first connection's check.
  [[ -f $dir/ssh_host_ed25519_key ]] || ssh-keygen -q -t ed25519 -N '' -f "$dir/ssh_host_ed25519_key"
  cat > "$dir/sshd_config" << CONFIG
Port $port
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $HOME/.ssh/authorized_keys
AllowUsers $(id -un)
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
X11Forwarding no
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
CONFIG
  log "sshd on port $port for user $(id -un), host key $(ssh-keygen -l -f "$dir/ssh_host_ed25519_key.pub" | cut -d' ' -f2)"
  /usr/sbin/sshd -D -e -f "$dir/sshd_config" &
  pids+=($!)
}

start_jupyter() {
  local token password args=()
  token=$(secret JUPYTER_TOKEN /run/secrets/jupyter_token)
  password=$(secret JUPYTER_PASSWORD /run/secrets/jupyter_password)
  if [[ -z $token && -z $password ]]; then
    token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
    log "no JUPYTER_TOKEN or JUPYTER_PASSWORD given: this container's token is $token"
  fi
  if [[ -n $password ]]; then
    local hashed
    hashed=$(JUPYTER_PASSWORD_PLAIN=$password /opt/jupyter/bin/python - << 'PY'
import os
from jupyter_server.auth import passwd
print(passwd(os.environ["JUPYTER_PASSWORD_PLAIN"]))
PY
)
    args+=("--PasswordIdentityProvider.hashed_password=$hashed")
  fi
  # jupyter_server reads the token from JUPYTER_TOKEN: it never appears on a command line.
  # An empty token with a password set means password login only.
  export JUPYTER_TOKEN=$token
  unset JUPYTER_PASSWORD JUPYTER_TOKEN_FILE JUPYTER_PASSWORD_FILE
  log "JupyterLab on port ${JUPYTER_PORT:-8888}, root $HOME"
  jupyter lab --no-browser --ip=0.0.0.0 --port="${JUPYTER_PORT:-8888}" \
    --ServerApp.root_dir="$HOME" "${args[@]}" &
  pids+=($!)
}

pids=()
trap 'kill "${pids[@]}" 2> /dev/null || true' TERM INT
start_sshd
unset SSH_AUTHORIZED_KEYS SSH_AUTHORIZED_KEYS_FILE
start_jupyter
# The container lives as long as both services do: when one ends, stop the other and exit with
# the first one's status, so a failed service shows as a stopped container, not a half-working one.
status=0
wait -n "${pids[@]}" || status=$?
log "a service ended (status $status); stopping the container"
kill "${pids[@]}" 2> /dev/null || true
wait || true
exit "$status"
