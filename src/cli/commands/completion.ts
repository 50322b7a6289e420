/**
 * `coffer completion bash|zsh|fish|powershell`: prints a shell completion script (@bomb.sh/tab). The script asks
 * the program itself (`coffer complete -- <words>`, a hidden command) for suggestions, which tab derives from the
 * commander tree: every command, option and argument choice is completed as registered, so it cannot drift.
 * Register it last, after every other command.
 */
import tab from '@bomb.sh/tab/commander';
import type { Command } from 'commander';

/**
 * tab's bash script reads the words with bash-completion's _get_comp_words_by_ref, which a bash without the
 * bash-completion package (macOS's, minimal images) lacks. This stand-in, defined only when that function is
 * missing, takes the words as bash split them (so `--opt=value` completes as two words there).
 */
const BASH_FALLBACK = `# Without the bash-completion package: a minimal _get_comp_words_by_ref.
if ! declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
  _get_comp_words_by_ref() {
    cur=\${COMP_WORDS[COMP_CWORD]}
    prev=\${COMP_WORDS[COMP_CWORD-1]}
    words=("\${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  }
fi
`;

export function registerCompletion(program: Command): void {
  const root = tab(program, { completionCommandName: 'completion' });
  const name = program.name();
  program.commands
    .find((command) => command.name() === 'completion')
    ?.description('print a shell completion script, e.g. `source <(coffer completion bash)` in ~/.bashrc')
    .action((shell: string) => {
      if (shell === 'bash') process.stdout.write(BASH_FALLBACK);
      root.setup(name, name, shell);
    });
}
