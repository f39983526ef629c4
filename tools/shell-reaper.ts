// Outside the sandbox a command's leftovers are found by process group and by a tag in their environment, and a
// command can shed both (`env -i setsid sleep 1000 &`). On Linux a small reaper in front of it closes that gap: it
// makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process the command starts, however it
// detaches, stays its descendant; when the command's shell ends, or Parlor asks it to stop, it kills all of them and
// waits until none is left. Perl, because it is on every Debian-based system (perl-base is essential) and can make
// the system call; where it is missing or the call fails, commands run as before.
import { execFileSync } from 'node:child_process';

/** prctl's system call number, by architecture (Linux). */
const PRCTL: Partial<Record<NodeJS.Architecture, number>> = { x64: 157, arm64: 167, riscv64: 167, arm: 172, ia32: 172 };

const REAPER = String.raw`
use strict; use POSIX ();
my $nr = shift @ARGV;
syscall($nr, 36, 1, 0, 0, 0) == 0 or die "prctl: $!\n";
my $child = fork();
defined $child or die "fork: $!\n";
if ($child == 0) { exec { $ARGV[0] } @ARGV; POSIX::_exit(127); }
sub children {
  opendir(my $d, '/proc') or return ();
  my @found;
  for my $p (grep { /^\d+$/ } readdir $d) {
    open(my $f, '<', "/proc/$p/stat") or next;
    my $s = <$f> // next;
    $s =~ s/^.*\)\s+//;
    my @field = split / /, $s;
    push @found, $p if $field[1] == $$;
  }
  return @found;
}
my $stopping = 0;
$SIG{ALRM} = sub { kill 'KILL', children() };
for my $name (qw(TERM INT HUP)) {
  $SIG{$name} = sub { return if $stopping++; kill 'TERM', children(); alarm 1; };
}
my $status = 0;
for (;;) {
  my $pid = waitpid(-1, 0);
  if ($pid == $child) { $status = $?; last }
  if ($pid < 0) { next if $!{EINTR}; last }
}
for (;;) {
  my @left = children();
  kill 'KILL', @left if @left;
  my $pid = waitpid(-1, 0);
  last if $pid < 0 && !$!{EINTR};
}
if (my $signal = $status & 127) {
  $SIG{$_} = 'DEFAULT' for qw(TERM INT HUP ALRM);
  kill $signal, $$;
}
POSIX::_exit($status >> 8);
`;

let found: { perl: string; nr: number } | null | undefined;

/** The reaper's command line in front of `file args...`, or undefined where it cannot run here. */
export function withReaper(file: string, args: readonly string[]): { file: string; args: string[] } | undefined {
  if (found === undefined) found = detect();
  if (!found) return undefined;
  return { file: found.perl, args: ['-e', REAPER, String(found.nr), file, ...args] };
}

function detect(): { perl: string; nr: number } | null {
  const nr = PRCTL[process.arch];
  if (process.platform !== 'linux' || nr === undefined) return null;
  for (const perl of ['/usr/bin/perl', '/bin/perl']) {
    try {
      // A trial run: the system call works here (a seccomp profile may forbid it) and the command's status comes back.
      execFileSync(perl, ['-e', REAPER, String(nr), '/bin/sh', '-c', 'exit 3'], { stdio: 'ignore', timeout: 5_000 });
    } catch (err) {
      if ((err as { status?: number }).status === 3) return { perl, nr };
    }
  }
  return null;
}
