# Sourced by the GPU benches: gpu_others prints the processes other than this
# shell's own that hold a CUDA context on the GPUs ("" when none, or when
# nvidia-smi cannot tell). A figure taken while another process computes on
# the same GPU is not a clean one: the benches print this in their header.
gpu_others() {
  command -v nvidia-smi > /dev/null || return 0
  local apps
  apps=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2> /dev/null || true)
  [ -n "$apps" ] || return 0
  local pid name mem out=""
  while IFS=', ' read -r pid name mem; do
    [ -n "$pid" ] || continue
    [ "$pid" = "$$" ] && continue
    out+="${out:+; }pid $pid ($(basename "$name"), $mem)"
  done <<< "$apps"
  echo "$out"
}

# One line for a bench's header: whether the GPU was shared when it started.
gpu_others_line() {
  local others
  others=$(gpu_others)
  if [ -n "$others" ]; then
    echo "**Warning: other processes held the GPU when this run started, so these figures are not clean:** $others."
  else
    echo "No other process held the GPU when this run started."
  fi
}
