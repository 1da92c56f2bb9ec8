# Sourced by the bench scripts' tests: refusals SCRIPT PPLAB ARGS... runs
# SCRIPT --pplab PPLAB with each of ARGS (one string of flags each) and
# fails unless each is refused with exit 2 and one line on stderr.
refusals() {
  local script=$1 pplab=$2 args err code
  shift 2
  for args in "$@"; do
    # shellcheck disable=SC2086
    if err=$(bash "$script" --pplab "$pplab" $args 2>&1 >/dev/null); then
      echo "FAIL: $args was accepted"
      return 1
    else
      code=$?
    fi
    [ "$code" -eq 2 ] || { echo "FAIL: $args: exit $code, expected 2"; return 1; }
    [ "$(wc -l <<< "$err")" -eq 1 ] || { echo "FAIL: $args: expected one line, got: $err"; return 1; }
    echo "refused $args: $err"
  done
}
