# Sourced by run_app.sh and run_tests.sh: `ensure_venv FILE...` makes .venv (python3 -m venv) when missing and
# installs the requirements FILEs into it, unless .venv was already built from those very files: each FILE's
# SHA-256 is kept in .venv/.requirements-stamp after a successful install, and a start whose FILEs all match it
# skips pip (re-checking every installed package took 79 s of a 160 s start on a busy machine). A FILE that
# changed empties the stamp first (its pins may move packages the others pinned), so the next start of each
# script installs its own files again; RELU_STUDIO_REINSTALL=1 forces the install.
RELU_STUDIO_STAMP=.venv/.requirements-stamp

ensure_venv() {
  [ -x .venv/bin/python ] || python3 -m venv .venv
  local file recorded current args=() stale=0 changed=0
  for file in "$@"; do
    args+=(-r "$file")
    current="$(sha256sum < "$file" | cut -d' ' -f1)"
    recorded="$(awk -v f="$file" '$2 == f { print $1 }' "$RELU_STUDIO_STAMP" 2>/dev/null || true)"
    [ "$recorded" = "$current" ] || stale=1
    [ -n "$recorded" ] && [ "$recorded" != "$current" ] && changed=1
  done
  [ "$stale" -eq 0 ] && [ "${RELU_STUDIO_REINSTALL:-0}" != 1 ] && return 0
  [ "$changed" -eq 1 ] && rm -f "$RELU_STUDIO_STAMP"
  .venv/bin/python -m pip install -q --disable-pip-version-check "${args[@]}"
  for file in "$@"; do
    { awk -v f="$file" '$2 != f' "$RELU_STUDIO_STAMP" 2>/dev/null || true
      echo "$(sha256sum < "$file" | cut -d' ' -f1) $file"; } > "$RELU_STUDIO_STAMP.new"
    mv "$RELU_STUDIO_STAMP.new" "$RELU_STUDIO_STAMP"
  done
}
