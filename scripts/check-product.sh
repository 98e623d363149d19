#!/usr/bin/env bash
# Checks that the library as installed carries no emulation: builds it with
# the command scripts/install.sh uses (cargo build --release --lib, without
# the `emulate` feature), then fails, naming what it found,
#   - if `cargo tree -e features` shows the feature `emulate` enabled, or
#   - if a symbol of the emulation, the simulator, the scenarios, the memory
#     board or clerk::Inline is in libsoslb.a (nm, demangled).
# Called by scripts/test.sh before the builds with the feature: the build
# re-links target/release/libsoslb.a to the library without emulation
# (cargo keeps both builds, so switching back costs no compiling).
#
# usage: scripts/check-product.sh [CARGO_ARGS...]   (extra arguments go to
#        both cargo commands, e.g. --features emulate to see the check fail)
# shellcheck source=scripts/setup.sh
. "$(dirname "$0")/setup.sh"
fail() { echo "check-product: $*" >&2; exit 1; }
command -v nm >/dev/null 2>&1 || fail "no nm: install binutils"

cargo build --release --lib "$@"
lib="$(target_dir)/release/libsoslb.a"
[ -f "$lib" ] || fail "cargo built no $lib"

# The crate's features enabled, inverted from the crate: `soslb feature "report"`.
features=$(cargo tree -e features -i soslb --prefix none "$@" | grep -o '^soslb feature "[a-z_]*"' | sort -u || true)
failed=0
if grep -q '"emulate"' <<<"$features"; then
    echo "check-product: the installed build enables the feature \`emulate\` (cargo tree -e features: $(tr '\n' ' ' <<<"$features")): no default feature may turn it on" >&2
    failed=1
fi

# Emulation's own modules and types, as demangled symbol paths.
pattern='soslb::(sim|scenario|emulate)::|soslb::board::memory|soslb::clerk::Inline'
found=$(nm -C "$lib" 2>/dev/null | grep -E "$pattern" | sed 's/^[0-9a-f]* *[A-Za-z] //' | sort -u || true)
if [ -n "$found" ]; then
    {
        echo "check-product: $lib holds emulation code ($(wc -l <<<"$found") symbols matching $pattern), for example:"
        head -5 <<<"$found" | sed 's/^/  /'
        echo "Gate it behind the \`emulate\` feature (#[cfg(feature = \"emulate\")])."
    } >&2
    failed=1
fi
((failed == 0)) || exit 1
echo "check-product: $lib has no emulation (features: $(tr '\n' ' ' <<<"$features" | sed 's/soslb feature //g; s/ $//'))"
