#!/usr/bin/env bash
# Fails on a source file over 800 lines or a function over 80 (from its `fn`
# line to its closing brace, outside `#[cfg(test)]` modules), listing each.
#
# usage: scripts/check-sizes.sh [SRC_DIR]   (default: src)
set -euo pipefail
src=${1:-src}
[ -d "$src" ] || { echo "check-sizes: no directory $src" >&2; exit 2; }
exec perl -e '
use strict; use warnings;
my ($src, $bad) = (shift, 0);
for my $f (split /\n/, `find "$src" -name "*.rs" | sort`) {
    open my $h, "<", $f or die "$f: $!";
    my @lines = <$h>;
    if (@lines > 800) { print STDERR "check-sizes: $f has ", scalar(@lines), " lines (at most 800)\n"; $bad++ }
    my ($name, $start, $depth, $open) = ("", 0, 0, 0);
    for my $i (0 .. $#lines) {
        my $l = $lines[$i];
        last if $l =~ /^\s*#\[cfg\(test\)\]/;
        $l =~ s{"(?:[^"\\]|\\.)*"|\x27(?:\\.|[^\x27\\])\x27|//.*}{ }g;
        if (!$name && $l =~ /^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:unsafe\s+)?(?:extern\s+"C"\s+)?fn\s+(\w+)/) {
            ($name, $start, $depth, $open) = ($1, $i, 0, 0);
        }
        next unless $name;
        my $o = () = $l =~ /\{/g; my $c = () = $l =~ /\}/g;
        $depth += $o - $c; $open ||= $o;
        if (!$open && $l =~ /;\s*$/) { $name = ""; next }    # a declaration
        next unless $open && $depth <= 0;
        my $n = $i - $start + 1;
        if ($n > 80) { printf STDERR "check-sizes: %s:%d: fn %s has %d lines (at most 80)\n", $f, $start + 1, $name, $n; $bad++ }
        $name = "";
    }
}
exit 0 unless $bad;
print STDERR "check-sizes: $bad too large: split them by concept (DESIGN.md section 10)\n";
exit 1;
' "$src"
