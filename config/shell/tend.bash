# bash completion for tend: commands, their options, app names from the
# workspace's tend.conf (found like tend finds it: -C DIR or the current
# directory, then each parent). Installed by `meson install`.

_tend_conf() {
	local dir=$1
	[ -n "$dir" ] || dir=$PWD
	while [ -n "$dir" ]; do
		if [ -f "$dir/tend.conf" ]; then
			printf '%s\n' "$dir/tend.conf"
			return 0
		fi
		[ "$dir" = / ] && return 1
		dir=${dir%/*}
		[ -n "$dir" ] || dir=/
	done
	return 1
}

# the [app "NAME"] names of a tend.conf
_tend_apps_in() {
	sed -n 's/^[[:space:]]*\[app[[:space:]]*"\([^"]*\)"[[:space:]]*\].*/\1/p' "$1" 2>/dev/null
}

_tend_apps() {
	local conf
	conf=$(_tend_conf "$1") || return 0
	_tend_apps_in "$conf"
}

# an option that takes its value after '=' gets no space after it
_tend_nospace() {
	if [ ${#COMPREPLY[@]} = 1 ] && [[ ${COMPREPLY[0]} == *= ]]; then
		compopt -o nospace 2>/dev/null
	fi
}

_tend() {
	local cur=${COMP_WORDS[COMP_CWORD]} cmd= dir= conf= i w
	local cmds="init sync plan ls status check drop watch stop top help"
	local common="-C -c --json -q --quiet -v --verbose --color= -h --help"
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		-C) dir=${COMP_WORDS[i + 1]}; i=$((i + 1)) ;;
		-c) conf=${COMP_WORDS[i + 1]}; i=$((i + 1)) ;;
		-*) ;;
		*) [ -z "$cmd" ] && cmd=$w ;;
		esac
	done
	case ${COMP_WORDS[COMP_CWORD - 1]} in
	-C) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	-c) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	=)	# bash splits --color=WHEN at the '='
		if [ "${COMP_WORDS[COMP_CWORD - 2]}" = --color ]; then
			COMPREPLY=($(compgen -W "auto always never" -- "$cur"))
			return
		fi ;;
	esac
	case $cur in
	--color=*)
		COMPREPLY=($(compgen -P --color= -W "auto always never" -- "${cur#--color=}"))
		return ;;
	esac
	if [ -z "$cmd" ]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$common --version" -- "$cur"))
			_tend_nospace
		else
			COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
		fi
		return
	fi
	local opts=$common
	case $cmd in
	sync) opts="$opts -n --dry-run --full --allow-delete" ;;
	watch) opts="$opts --daemon --tui --allow-delete" ;;
	help) COMPREPLY=($(compgen -W "$cmds config" -- "$cur")); return ;;
	init) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		_tend_nospace
		return
	fi
	case $cmd in
	sync | plan | ls | check | drop)
		local apps
		if [ -n "$conf" ]; then
			apps=$(_tend_apps_in "$conf")
		else
			apps=$(_tend_apps "$dir")
		fi
		COMPREPLY=($(compgen -W "$apps" -- "$cur"))
		;;
	esac
}
complete -F _tend tend
