# fish completion for tend: commands, their options, app names from the
# workspace's tend.conf. Installed by `meson install`.

function __tend_apps
	set -l dir (pwd)
	while test -n "$dir"
		if test -f "$dir/tend.conf"
			sed -n 's/^[[:space:]]*\[app[[:space:]]*"\([^"]*\)"[[:space:]]*\].*/\1/p' "$dir/tend.conf"
			return
		end
		test "$dir" = / ; and return
		set dir (dirname "$dir")
	end
end

set -l cmds init sync plan ls status check drop watch stop top help
complete -c tend -f
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a init -d 'write a commented tend.conf'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a sync -d 'apply the difference'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a plan -d 'show what sync would do'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a ls -d 'tracked target states'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a status -d 'per-app counts and the last pass'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a check -d 'compare targets with their records'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a drop -d 'delete what an app wrote and forget it'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a watch -d 'the agent'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a stop -d 'stop the agent'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a top -d 'the dashboard'
complete -c tend -n "not __fish_seen_subcommand_from $cmds" -a help -d 'help on a command'
complete -c tend -n "__fish_seen_subcommand_from sync plan ls check drop" -a '(__tend_apps)' -d app
complete -c tend -n "__fish_seen_subcommand_from help" -a "$cmds config"
complete -c tend -s C -r -a '(__fish_complete_directories)' -d 'run as if started in DIR'
complete -c tend -s c -r -F -d 'use FILE as tend.conf'
complete -c tend -l json -d 'machine-readable output'
complete -c tend -s q -l quiet -d 'only errors'
complete -c tend -s v -l verbose -d 'more detail'
complete -c tend -l color -x -a 'auto always never' -d 'colour'
complete -c tend -n "__fish_seen_subcommand_from sync" -s n -l dry-run -d 'apply nothing: plan'
complete -c tend -n "__fish_seen_subcommand_from sync" -l full -d 're-apply everything'
complete -c tend -n "__fish_seen_subcommand_from sync watch" -l allow-delete -d 'apply held deletes'
complete -c tend -n "__fish_seen_subcommand_from watch" -l daemon -d 'detach'
complete -c tend -n "__fish_seen_subcommand_from watch" -l tui -d 'with the dashboard'
