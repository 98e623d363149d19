#!/usr/bin/env bash
# Fails when the files of a crate's source tree import each other in a loop,
# or its top-level modules do (a folder such as policy/ counted as one).
# An import is any `crate::`, `super::`, `self::` or child module's path (in
# a `use` or in the code), outside `#[cfg(test)]` modules; it
# ties the importing file to the file of the longest module prefix it names.
# A `pub use` re-exports: a path through it leads to the file it names.
# Binaries (src/bin) are crates of their own and are left out.
#
# usage: scripts/check-layers.sh [SRC_DIR]   (default: src)
set -euo pipefail
src=${1:-src}
[ -f "$src/lib.rs" ] || { echo "check-layers: no $src/lib.rs" >&2; exit 2; }
exec perl -e '
use strict; use warnings;
my $src = shift;
my (%file_of, @files);    # module path ("a::b", "" for the crate) -> file
for my $f (split /\n/, `find "$src" -name "*.rs" -not -path "$src/bin/*" | sort`) {
    my $m = substr($f, length($src) + 1);
    $m =~ s/\.rs$//; $m =~ s{(^|/)(mod|lib)$}{}; $m =~ s{/}{::}g;
    $file_of{$m} = $f; push @files, [$f, $m];
}
# The file of the longest prefix of module path @p that is a module.
my %alias;    # "module::Name" re-exported by `pub use` -> the file it names
sub target {
    my @p = @_;
    while (@p) {
        my $m = join "::", @p;
        return $alias{$m} if exists $alias{$m};
        return $file_of{$m} if exists $file_of{$m};
        pop @p;
    }
    $file_of{""};
}
# "a::{b, c::{d, e}}" -> ("a::b", "a::c::d", "a::c::e")
sub expand {
    my ($s) = @_; $s =~ s/\s+//g;
    return ($s) unless $s =~ /^(.*?)\{(.*)\}$/;
    my ($pre, $body, @parts, $depth, $cur) = ($1, $2, (), 0, "");
    for my $ch (split //, $body) {
        if ($ch eq "," && !$depth) { push @parts, $cur; $cur = ""; next }
        $depth++ if $ch eq "{"; $depth-- if $ch eq "}"; $cur .= $ch;
    }
    push @parts, $cur;
    map { expand($pre . $_) } grep { length } @parts;
}
my %edge;
# Two passes: the re-exports first, then the imports through them.
for my $pass (0, 1) { for my $e (@files) {
    my ($f, $m) = @$e;
    open my $h, "<", $f or die "$f: $!";
    my $text = "";
    while (<$h>) { last if /^\s*#\[cfg\(test\)\]/; $text .= $_ }
    # Strings, character literals and comments, in one pass (each may hold the others).
    $text =~ s{"(?:[^"\\]|\\.)*"|\x27(?:\\.|[^\x27\\])\x27|//[^\n]*}{ }gs;
    my @paths;
    my %reexport;
    while ($text =~ /\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);/g) {
        my ($pub, @e) = ($1, expand($2));
        push @paths, @e; if ($pub) { $reexport{$_} = 1 for @e }
    }
    push @paths, $1 while $text =~ /(?<![\w:])((?:crate|super|self|[a-z_]\w*)(?:::\w+)+)/g;
    for my $p (@paths) {
        my $is_reexport = $reexport{$p};
        $p =~ s/\s+as\s+\w+$//;
        my @s = split /::/, $p;
        my @base;
        if ($s[0] eq "crate") { shift @s }
        elsif ($s[0] eq "self") { shift @s; @base = split /::/, $m }
        elsif ($s[0] eq "super") { @base = split /::/, $m; while (@s && $s[0] eq "super") { shift @s; pop @base } }
        elsif (exists $file_of{join "::", grep { length } $m, $s[0]}) { @base = split /::/, $m }
        else { next }
        my $t = target(@base, @s);
        if ($is_reexport) { $alias{join "::", grep { length } $m, $s[-1]} = $t if !$pass }
        elsif ($pass) { $edge{$f}{$t} = 1 if $t ne $f }
    }
} }
# Tarjan: strongly connected components of more than one node are loops.
sub loops {
    my ($edge, @nodes) = @_;
    my ($index, @stack, %on, %idx, %low, @found) = (0);
    my $visit; $visit = sub {
        my ($v) = @_; $idx{$v} = $low{$v} = $index++; push @stack, $v; $on{$v} = 1;
        for my $w (sort keys %{ $edge->{$v} || {} }) {
            if (!exists $idx{$w}) { $visit->($w); $low{$v} = $low{$w} if $low{$w} < $low{$v} }
            elsif ($on{$w}) { $low{$v} = $idx{$w} if $idx{$w} < $low{$v} }
        }
        return unless $low{$v} == $idx{$v};
        my @c; while (1) { my $w = pop @stack; delete $on{$w}; push @c, $w; last if $w eq $v }
        push @found, [sort @c] if @c > 1;
    };
    $visit->($_) for grep { !exists $idx{$_} } @nodes;
    @found;
}
my $short = sub { map { substr($_, length($src) + 1) } @_ };
# The top-level module of a file: its folder under src/, or the file.
my $top = sub { my ($f) = $short->(@_); $f =~ s{/.*}{/}; $f };
my %module_edge;
for my $f (keys %edge) {
    for my $t (keys %{ $edge{$f} }) {
        my ($a, $b) = ($top->($f), $top->($t));
        $module_edge{$a}{$b} = 1 if $a ne $b;
    }
}
my $failed = 0;
for my $c (loops(\%edge, map { $_->[0] } @files)) {
    my %in = map { $_ => 1 } @$c;
    print STDERR "check-layers: an import loop of ", scalar(@$c), " files in $src:\n";
    for my $a (@$c) { print STDERR "  ", $short->($a), " -> ", join(", ", $short->(grep { $in{$_} } sort keys %{ $edge{$a} })), "\n" }
    $failed = 1;
}
my %modules = map { $top->($_->[0]) => 1 } @files;
for my $c (loops(\%module_edge, sort keys %modules)) {
    my %in = map { $_ => 1 } @$c;
    print STDERR "check-layers: an import loop of ", scalar(@$c), " top-level modules in $src:\n";
    for my $a (@$c) {
        my @by = grep { $top->($_) eq $a } sort keys %edge;
        my @ties = map { my $f = $_; map { ($short->($f))[0] . " -> " . ($short->($_))[0] } grep { $in{$top->($_)} && $top->($_) ne $a } sort keys %{ $edge{$f} } } @by;
        print STDERR "  $a: ", join(", ", @ties), "\n";
    }
    $failed = 1;
}
exit 0 unless $failed;
print STDERR "check-layers: a file, and a top-level module, may import only from those below it (DESIGN.md section 10)\n";
exit 1;
' "$src"
