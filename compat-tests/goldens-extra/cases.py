"""The extra goldens' cases, by area of issue #23 (capture.py records them against real Slurm
22.05; compat-tests/tests/extra_goldens.rs replays them against Flotilla). Each case is a bash
snippet run after `. ./lib.sh` (helpers: sb, m, st, wst, wend, fin) in /home/<user>/x; it
prints only what does not depend on job ids (they are masked as J1, J2, ... by `m`) and
cancels its jobs (`fin`)."""

SCRIPTS = {
    "sleep.sh": "#!/bin/bash\nsleep ${1:-600}\n",
    "true.sh": "#!/bin/bash\ntrue\n",
}

# Area a01: sbatch's script scanner and argument lexer (src/sbatch/opt.c: _get_argument,
# _opt_batch_script / process_batch_script; sbatch.c: _get_script_buffer).
def show(fmt="%j|%l|%k|%P"):
    return "squeue -h -j $J1 -o '%s' | m\nfin" % fmt

def script_case(name, body, args="", fmt="%j|%l|%k|%P", note=""):
    return {"name": name, "cmd": "cat > t.sh <<'EOF'\n%sEOF\nsb --hold %s t.sh\n%s" % (body, args, show(fmt)), "note": note}

# Node features for the --constraint cases: set by an admin at run time (node_mgr.c
# update_node), cleared after.
FEAT_ON = "scontrol update NodeName=gpu01 AvailableFeatures=ib,fast\nscontrol update NodeName=gpu02 AvailableFeatures=ib\nscontrol update NodeName=gpu03 AvailableFeatures=slow\n"
FEAT_OFF = "scontrol update NodeName=gpu[01-04] ActiveFeatures= \nscontrol update NodeName=gpu[01-04] AvailableFeatures=\n"

A01 = [
    script_case("stop_at_first_command", "#!/bin/bash\n#SBATCH -J before\necho hi\n#SBATCH -J after\n#SBATCH -t 9\n"),
    script_case("blank_and_comment_lines_scanned", "#!/bin/bash\n\n# a comment\n\n#SBATCH -J deep\n   \n#SBATCH -t 3\ntrue\n"),
    script_case("double_quoted_value", "#!/bin/bash\n#SBATCH -J \"two words\"\n#SBATCH --comment \"a # in quotes\"\ntrue\n"),
    script_case("single_quoted_value", "#!/bin/bash\n#SBATCH --comment='it''s'\n#SBATCH -J 'x y'\ntrue\n"),
    script_case("trailing_comment_after_value", "#!/bin/bash\n#SBATCH -J named # the name\n#SBATCH -t 5#no space\ntrue\n"),
    script_case("lowercase_directive_ignored", "#!/bin/bash\n#sbatch -J lower\n#Sbatch -t 4\n#SBATCH -J upper\ntrue\n"),
    script_case("two_options_one_line", "#!/bin/bash\n#SBATCH -J two -t 6 --comment=c1\ntrue\n"),
    script_case("stray_word_in_directive", "#!/bin/bash\n#SBATCH -J one stray\n#SBATCH -t 8\ntrue\n"),
    script_case("tab_after_directive", "#!/bin/bash\n#SBATCH\t-J tabbed\n#SBATCH  -t  4\ntrue\n"),
    script_case("backslash_escape", "#!/bin/bash\n#SBATCH -J a\\ b\n#SBATCH --comment=x\\\"y\ntrue\n"),
    script_case("slurm_prefix", "#!/bin/bash\n#SLURM -J slurmprefix\n#SBATCH -t 3\ntrue\n"),
    script_case("cli_over_script", "#!/bin/bash\n#SBATCH -J script -t 9\ntrue\n", args="-J cli"),
    {"name": "env_under_script", "cmd": "cat > t.sh <<'EOF'\n#!/bin/bash\n#SBATCH -J script\ntrue\nEOF\nSBATCH_JOB_NAME=env SBATCH_TIMELIMIT=7 sb --hold t.sh\n" + show()},
    {"name": "env_under_cli", "cmd": "cat > t.sh <<'EOF'\n#!/bin/bash\ntrue\nEOF\nSBATCH_JOB_NAME=env sb --hold -J cli t.sh\n" + show()},
    {"name": "no_interpreter_line", "cmd": "printf 'echo hi\\n#SBATCH -J x\\n' > t.sh\nsb --hold t.sh"},
    {"name": "dos_line_breaks", "cmd": "printf '#!/bin/bash\\r\\necho hi\\r\\n' > t.sh\nsb --hold t.sh"},
    {"name": "empty_script", "cmd": ": > t.sh\nsb --hold t.sh"},
    {"name": "nul_byte", "cmd": "printf '#!/bin/bash\\necho a\\0b\\n' > t.sh\nsb --hold t.sh"},
    {"name": "unmatched_quote", "cmd": "printf '#!/bin/bash\\n#SBATCH -J \"open\\ntrue\\n' > t.sh\nsb --hold t.sh\nsqueue -h -u alice -o '%j|%k' | m\nfin"},
    {"name": "script_on_stdin", "cmd": "sb --hold <<'EOF'\n#!/bin/bash\n#SBATCH -J fromstdin\n#SBATCH -t 2\ntrue\nEOF\n" + show()},
    {"name": "unknown_option_in_script", "cmd": "printf '#!/bin/bash\\n#SBATCH --bogus-flag\\ntrue\\n' > t.sh\nsb --hold t.sh"},
    {"name": "wrap_with_script_args", "cmd": "sb --hold --wrap 'true' t.sh"},
    # --uid and --gid (slurm_opt.c arg_set_uid/arg_set_gid, uid.c uid_from_string): root
    # only, a name or a known number; each defaults to the caller's own separately.
    {"name": "uid_not_root", "cmd": "sbatch --uid=bob --wrap true; echo rc=$?\nsbatch --gid=alice --wrap true; echo rc=$?"},
    {"name": "uid_unknown", "user": "root", "cmd": "sbatch --uid=nosuch --wrap true; echo rc=$?\nsbatch --uid=99999 --wrap true; echo rc=$?\nsbatch --gid=nosuch --wrap true; echo rc=$?"},
    {"name": "uid_as_root", "user": "root", "cmd": ". /home/alice/x/lib.sh\nsb --uid=alice -H --wrap true -D /home/alice/x\nsb --uid=2002 --gid=alice -H --wrap true -D /home/bob/x\nsqueue -h -j $J1,$J2 -o '%i|%u|%g|%a' | m | sort\nscontrol show job $J1 | grep -oE '(UserId|GroupId)=[^ ]*'\nfin"},
    {"name": "uid_in_script", "user": "root", "cmd": ". /home/alice/x/lib.sh\nprintf '#!/bin/bash\\n#SBATCH --uid=bob\\ntrue\\n' > /tmp/uid_in_script.sh\nsb -H -D /home/bob/x /tmp/uid_in_script.sh\nsqueue -h -j $J1 -o '%u|%g' | m\nrm -f /tmp/uid_in_script.sh\nfin"},
    # Option values sbatch checks though Flotilla does not use them (slurm_opt.c setters,
    # proc_args.c parse_int: "Invalid numeric value" and exit 1; the setters' own errors exit
    # 255) and srun's and salloc's counts (the same parse_int).
    {"name": "numeric_values_refused", "cmd": "sbatch -H -n x --wrap true; echo rc=$?\nsbatch -H --cpus-per-task=-1 --wrap true; echo rc=$?\nsbatch -H --mincpus=0 --wrap true; echo rc=$?\nsbatch -H -n '2 ' --wrap true; echo rc=$?\nsbatch -H --ntasks-per-node=abc --wrap true; echo rc=$?"},
    {"name": "numeric_value_too_big", "cmd": "sbatch -H -n 99999999999999999999 --wrap true; echo rc=$?\nsbatch -H -n -99999999999999999999 --wrap true; echo rc=$?"},
    {"name": "numeric_options_unused", "cmd": "sbatch -H --ntasks-per-core=x --wrap true; echo rc=$?\nsbatch -H --threads-per-core=x --wrap true; echo rc=$?\nsbatch -H --cores-per-socket=x --wrap true; echo rc=$?\nsbatch -H --thread-spec=0 --wrap true; echo rc=$?\nsbatch -H --switches=x@5 --wrap true; echo rc=$?"},
    {"name": "numeric_value_accepted", "cmd": "sb -H -n ' 2' --mincpus=+3 --wait-all-nodes=0 --switches=2@1:00 --wrap true\nfin"},
    {"name": "mail_type_values", "cmd": "sbatch -H --mail-type=bogus --wrap true; echo rc=$?\nsbatch -H --mail-type=, --wrap true; echo rc=$?\nsb -H --mail-type=END,bogus --wrap true\nsb -H --mail-type=none,BEGIN --wrap true\nfin"},
    {"name": "tmp_values", "cmd": "sbatch -H --tmp=abc --wrap true; echo rc=$?\nsbatch -H --tmp=5X --wrap true; echo rc=$?\nsbatch -H --tmp=-1 --wrap true; echo rc=$?\nsb -H --tmp=10G --wrap true\nfin"},
    {"name": "flag_words", "cmd": "sbatch -H --kill-on-invalid-dep=maybe --wrap true; echo rc=$?\nsbatch -H --gres-flags=bogus --wrap true; echo rc=$?\nsb -H --kill-on-invalid-dep=YES --gres-flags=Enforce-Binding --wrap true\nfin"},
    {"name": "wait_all_nodes_and_delay_boot", "cmd": "sbatch -H --wait-all-nodes=5 --wrap true; echo rc=$?\nsbatch -H --wait-all-nodes=x --wrap true; echo rc=$?\nsbatch -H --delay-boot=x --wrap true; echo rc=$?\nsbatch -H --delay-boot=1:2:3:4 --wrap true; echo rc=$?\nsb -H --wait-all-nodes=1 --delay-boot=1:00 --wrap true\nfin"},
    {"name": "srun_salloc_counts", "cmd": "srun -n x true; echo rc=$?\nsrun --mincpus=0 true; echo rc=$?\nsalloc -n x true; echo rc=$?"},
    # --reservation (job_mgr.c _job_create: validate_job_resv after the job id and the
    # dependency; an unknown name is ESLURM_RESERVATION_INVALID, the id used, no record).
    {"name": "reservation_unknown", "cmd": "sbatch -H --reservation=nosuch --wrap true; echo rc=$?\nSBATCH_RESERVATION=r2 sbatch -H --wrap true; echo rc=$?\nprintf '#!/bin/bash\\n#SBATCH --reservation=r3\\ntrue\\n' > resv.sh\nsbatch -H resv.sh; echo rc=$?\nrm -f resv.sh"},
    {"name": "reservation_uses_an_id", "cmd": "sb -H --wrap true\nsbatch -H --reservation=r1 --wrap true; echo rc=$?\nsb -H --wrap true\necho \"ids apart: $((J2 - J1))\"\nsqueue -h -t all -u alice -o '%i|%T' | m | grep '^J' | sort\nfin"},
    {"name": "reservation_empty", "cmd": "sb -H --reservation= --wrap true\nsqueue -h -j $J1 -o '%T|%r' | m\nfin"},
    {"name": "reservation_salloc_srun", "cmd": "salloc --reservation=foo true; echo rc=$?\nsrun --reservation=foo true; echo rc=$?"},
    # A node's shape (slurm_opt.c setters, proc_args.c verify_hint and
    # verify_socket_core_thread_count, sbatch opt.c _opt_verify, job_mgr.c
    # _copy_job_desc_to_job_record pn_min_cpus, job_info.c and squeue print.c displays).
    # Shape lines are not piped through `m`: they hold no job id, and `2:*:*` is not one.
    {"name": "hint_values", "cmd": "sbatch -H --hint=bogus --wrap true; echo rc=$?\nsbatch -H --hint=compute_bound,bogus --wrap true; echo rc=$?\nsbatch -H --hint=help --wrap true; echo rc=$?\nsb -H --hint=bogus --ntasks-per-core=1 --wrap true\nsb -H --hint=bogus -B 2 --wrap true\nfin"},
    {"name": "hint_shapes", "cmd": "for h in memory_bound nomultithread compute_bound multithread MEMORY_BOUND 'multithread,compute_bound'; do sb -H --hint=$h --wrap true >/dev/null; j=${J[-1]}; echo \"$h: $(scontrol show job $j | grep -oE '(ReqB:S:C:T|NtasksPerN:B:S:C|NumTasks)=[^ ]*' | tr '\\n' ' ')$(squeue -h -j $j -o '%z|%H|%I|%J')\"; done\nfin"},
    {"name": "extra_node_info", "cmd": "for b in 2 2:4 '*:4:1' 1-2:3 ':2' 1:2:1:9; do sb -H -B \"$b\" --wrap true >/dev/null; j=${J[-1]}; echo \"$b: $(scontrol show job $j | grep -oE '(NumCPUs|NumTasks|ReqB:S:C:T|Socks/Node)=[^ ]*' | tr '\\n' ' ')$(squeue -h -j $j -o '%z')\"; done\nfin"},
    {"name": "extra_node_info_refused", "cmd": "sbatch -H -B x --wrap true; echo rc=$?\nsbatch -H -B 1- --wrap true; echo rc=$?\nsbatch -H -B 2:-1 --wrap true; echo rc=$?\nsbatch -H -B 1:2:3x --wrap true; echo rc=$?\nsbatch -H -B 99999999999 --wrap true; echo rc=$?"},
    {"name": "min_cpus_and_tmp", "cmd": "for o in '--mincpus=4 -c 2' '--mincpus=1 -c 3' '--ntasks-per-node=2 -c 2' '--ntasks-per-node=3 --mincpus=2' '-n 4 -c 2' '--ntasks-per-node=1 -c 2' '--tmp=1500M' '--tmp=2048K' '--tmp=10G' '--tmp=1536 --mem=1536' '--mincpus=2048'; do sb -H $o --wrap true >/dev/null; j=${J[-1]}; echo \"$o: $(scontrol show job $j | grep -oE '(MinCPUsNode|MinMemoryNode|MinTmpDiskNode|NtasksPerN:B:S:C)=[^ ]*' | tr '\\n' ' ')$(squeue -h -j $j -o '%c|%d')\"; done\nfin"},
    {"name": "shape_long_fields", "cmd": "sb -H --wrap true >/dev/null\nsb -H --ntasks-per-node=2 --ntasks-per-core=1 -B 2:3:1 --tmp=5G --mincpus=3 --wrap true >/dev/null\nsqueue -h -j $J1 -O 'ntpernode:6,ntpercore:6,sockets:6,cores:6,threads:6,sct:8,mincpus:6,mintmpdisk:8'\nsqueue -h -j $J2 -O 'ntpernode:6,ntpercore:6,sockets:6,cores:6,threads:6,sct:8,mincpus:6,mintmpdisk:8'\nsqueue -j $J2 -O 'ntpernode,ntpercore,sockets,cores,threads' | head -1\nfin"},
    {"name": "tasks_from_node_shape", "cmd": "for o in '-N 2 --sockets-per-node=2 --cores-per-socket=2' '-N 2 --ntasks-per-node=2 --threads-per-core=1' '-N 1-2 -B 2' '-N 2 -n 3 -B 2' '--sockets-per-node=2' '-N 1 --hint=memory_bound'; do sb -H $o --wrap true >/dev/null; j=${J[-1]}; echo \"$o: $(scontrol show job $j | grep -oE '(NumNodes|NumCPUs|NumTasks)=[^ ]*' | tr '\\n' ' ')\"; done\nfin"},
    {"name": "core_spec_ignored", "cmd": "sb -H -S 2 --wrap true\nsb -H --thread-spec=1 --wrap true\nsbatch -H -S 2 --thread-spec=1 --wrap true; echo rc=$?\nsbatch -H -S x --wrap true; echo rc=$?\nsb -H -S 0 --wrap true\nscontrol show job $J1 | grep -oE 'CoreSpec=[^ ]*'\nfin"},
    # --exclusive's values and -s (slurm_opt.c arg_set_exclusive: the job's `shared`, shown
    # as OverSubscribe= and squeue %h).
    {"name": "exclusive_values", "cmd": "sbatch -H --exclusive=bogus --wrap true; echo rc=$?\nfor o in --exclusive=user --exclusive=MCS -s --exclusive=oversubscribe '--exclusive --oversubscribe' '--oversubscribe --exclusive' --exclusive=exclusive; do sb -H $o --wrap true >/dev/null; j=${J[-1]}; echo \"$o: $(scontrol show job $j | grep -oE 'OverSubscribe=[^ ]*') $(squeue -h -j $j -o '%h')\"; done\nfin"},
    # Values of options Flotilla takes and does not use, as their setters check them
    # (slurm_opt.c arg_set_nice, arg_set_open_mode, arg_set_get_user_env, arg_set_profile,
    # arg_set_acctg_freq, arg_set_gpu_bind, parse_int and str_to_mbytes; sbatch.c
    # _set_rlimit_env for --propagate).
    {"name": "nice_values", "cmd": "for v in x 5x '' ' 7' 2147483646 -2147483646; do sbatch -H \"--nice=$v\" --wrap true >/dev/null 2>/tmp/nice_err.$$; rc=$?; echo \"[$v] rc=$rc $(cat /tmp/nice_err.$$)\"; done\nrm -f /tmp/nice_err.$$\nsqueue -h -u alice -o '%y' | sort -n | uniq -c\nscancel -u alice"},
    {"name": "open_mode_and_user_env", "cmd": "sbatch -H --open-mode=bogus --wrap true; echo rc=$?\nsbatch -H --get-user-env=bogus --wrap true; echo rc=$?\nsbatch -H --get-user-env=5x --wrap true; echo rc=$?\nsb -H --open-mode=Append --get-user-env=10L --wrap true\nsb -H --open-mode=t --get-user-env --wrap true\nfin"},
    {"name": "profile_and_acctg_freq", "cmd": "sbatch -H --profile=bogus --wrap true; echo rc=$?\nsbatch -H --acctg-freq=bogus --wrap true; echo rc=$?\nsbatch -H --acctg-freq=task=30,energy=x,bogus --wrap true; echo rc=$?\nsbatch -H --acctg-freq=-1 --wrap true; echo rc=$?\nsb -H --profile=TaskX --acctg-freq=30,ENERGY=5,network=0 --wrap true\nsb -H --profile=none --acctg-freq=xfilesystem=7 --wrap true\nfin"},
    {"name": "propagate_values", "cmd": "sbatch -H --propagate=bogus --wrap true; echo rc=$?\nsbatch -H --propagate=stack --wrap true; echo rc=$?\nsbatch -H --propagate=STACK,bogus --wrap true; echo rc=$?\nsb -H --propagate=STACK,RLIMIT_CORE --wrap true\nsb -H --propagate --wrap true\nsb -H --propagate=NONE --wrap true\nfin"},
    {"name": "gpu_bind_values", "cmd": "for v in bogus closest none map_gpu:0,1 map_gpu:0x1 mask_gpu:0x3,f mask_gpu:z 'map_gpu:1*2' single:x per_task:-1 'verbose,closest' 'Verbose,map_gpu:2' ''; do sbatch -H \"--gpu-bind=$v\" --wrap true >/dev/null 2>/tmp/gb_err.$$; echo \"[$v] rc=$? $(cat /tmp/gb_err.$$)\"; done\nrm -f /tmp/gb_err.$$\nscancel -u alice"},
    {"name": "gpu_option_counts", "cmd": "sbatch -H --ntasks-per-socket=x --wrap true; echo rc=$?\nsbatch -H --cpus-per-gpu=0 --wrap true; echo rc=$?\nsbatch -H --ntasks-per-gpu=x --wrap true; echo rc=$?\nsbatch -H --mem-per-gpu=x --wrap true; echo rc=$?"},
    # MailUser=/MailType= (job_info.c: a line after TresPerTask when a type is set;
    # proc_args.c parse_mail_type/print_mail_type; job_mgr.c _get_mail_user).
    {"name": "mail_shown", "cmd": "for o in --mail-type=END --mail-type=ALL '--mail-type=END,FAIL --mail-user=bob@x' --mail-user=bob --mail-type=NONE --mail-type=BEGIN,NONE,END --mail-type=TIME_LIMIT_50,ARRAY_TASKS,begin --mail-type=ALL,TIME_LIMIT,TIME_LIMIT_80,TIME_LIMIT_90 '--mail-type=END --gpus=1'; do sb -H $o --wrap true >/dev/null; j=${J[-1]}; echo \"[$o] $(scontrol show job $j | sed -n '/Power=/,$p' | grep -vE '^ *$' | tr -s ' ' | tr '\\n' ' ')\"; done\nfin"},
    # Line 38 of scontrol show job (job_info.c): --gres-flags, --kill-on-invalid-dep and
    # --spread-job bits, written one after the other.
    {"name": "job_flags_line", "cmd": "for o in --gres-flags=enforce-binding '--gres-flags=enforce-binding --gres-flags=disable-binding' --kill-on-invalid-dep=yes '--kill-on-invalid-dep=yes --kill-on-invalid-dep=no' '--spread-job --gres-flags=Enforce-Binding --kill-on-invalid-dep=NO' --spread-job; do sb -H $o --wrap true >/dev/null; j=${J[-1]}; echo \"[$o] $(scontrol show job $j | sed -n '/Power=/,$p' | grep -vE '^ *$' | tr -s ' ' | tr '\\n' ' ')\"; done\nfin"},
    # The node-configuration test at submission (node_scheduler.c _build_node_list, its
    # messages from _set_err_msg; adjust_cpus_nppcu for --ntasks-per-core): CPUs, memory,
    # temporary disk (the reference's nodes have no TmpDisk=), then sockets/cores/threads.
    {"name": "node_config_refused", "cmd": "for o in --mincpus=65 --mincpus=64 '-B 3' --tmp=1 --cores-per-socket=33 --threads-per-core=2 '--ntasks-per-core=2 --mincpus=129' '--mincpus=65 --mem=600000' '-B 3 --tmp=5' '--mem=600000 --tmp=5' --sockets-per-node=3 '-p debug -B 3'; do echo \"[$o]\"; sb -t 5 $o --wrap true; done\nfin"},
    # --mincpus takes CPUs (cons_common job_test.c: at least nodes x pn_min_cpus, handed out
    # -c at a time by dist_tasks.c).
    {"name": "mincpus_allocated", "cmd": "for o in --mincpus=4 '--mincpus=7 -c 2' '--mincpus=5 -N 2 --ntasks-per-node=2' '--mincpus=3 -c 2' '--mincpus=9 -n 2 -c 2'; do sb -t 5 $o --wrap 'sleep 600' >/dev/null; j=${J[-1]}; wst $j RUNNING; echo \"[$o] $(squeue -h -j $j -o '%C|%c|%D') $(scontrol show job $j | grep -oE 'NumCPUs=[^ ]*|MinCPUsNode=[^ ]*' | tr '\\n' ' ')\"; done\nfin"},
    # A job submitted held is not tested against the nodes (node_scheduler.c select_nodes
    # returns ESLURM_JOB_HELD for priority 0 before _build_node_list).
    {"name": "held_not_tested", "cmd": "for o in --mincpus=65 '-B 3' --tmp=1 --mem=600000 '-c 65' --gres=gpu:9 --gres=gpu:a100:1; do sb -H -t 5 $o --wrap true >/dev/null; echo \"[$o] rc=$? $(squeue -h -j ${J[-1]} -o '%T|%r|%Q')\"; done\nfin"},
    # Time specifications (parse_time.c parse_time; slurm_opt.c arg_set_begin and
    # arg_set_deadline): parse_time's own line with the position, then sbatch's.
    {"name": "begin_deadline_specs", "cmd": "for o in --begin=bogus --begin=now+x --begin=now+1h --begin= --begin=Today --deadline=bogus --deadline= --begin=now+1hourx --begin=now+1hour+ --begin=3pm --begin=25:00 '--begin=tomorrow now+1'; do echo \"[$o]\"; sb -H \"$o\" --wrap true; done\nsb -H '--begin=now + 1 hour' --wrap true\nsb -H --begin=2099-02-31T10:00 --wrap true\nscontrol show job $J2 | grep -oE 'EligibleTime=[^ ]*'\nfin"},
    {"name": "sacct_time_specs", "cmd": "for v in bogus now+x now+1h Today 25:00 12:61 2026-13-01 13/01 uts5 3pm 'tomorrow now+1' now+1hour+; do sacct -S \"$v\" -n -X -o jobid >/dev/null 2>/tmp/st_err.$$; echo \"[$v] rc=$? $(cat /tmp/st_err.$$)\"; done\nrm -f /tmp/st_err.$$"},
    # Values of options Flotilla reads and does not act on, as their setters check them:
    # --cpu-freq (cpu_frequency.c cpu_freq_verify_cmdline), --mem-bind
    # (slurm_resource_info.c slurm_verify_mem_bind), --gpu-freq (tres_frequency.c
    # tres_freq_verify_cmdline), -m (proc_args.c verify_dist_type; arbitrary needs -w,
    # slurm_opt_create_job_desc), --power (power_flags_id: warned once per pass over the
    # options, twice from the command line).
    {"name": "freq_bind_dist_power_values", "cmd": "for o in --cpu-freq=bogus --cpu-freq=low-high --cpu-freq=1000-2000:bogus --cpu-freq=performance --cpu-freq=Low --cpu-freq=100000 --cpu-freq=conservative --cpu-freq=2000-1000 --cpu-freq=perf:perf --cpu-freq=1000:perf --cpu-freq=low-high:ondemand --mem-bind=bogus --mem-bind=local --mem-bind=map_mem:0,1 --mem-bind=mask_mem:0x1 --mem-bind=map_mem: --mem-bind=map_mem:0*x --mem-bind=mask_mem:0xg --mem-bind=v,local,map_mem:1,2 --mem-bind=map_mem:1*0 --gpu-freq=bogus --gpu-freq=high --gpu-freq=memory=low,verbose --gpu-freq=1000 --gpu-freq= --gpu-freq=High --gpu-freq=memory=x -mbogus -mblock -mcyclic:cyclic -mblock:block:fcyclic -mplane=4 -mplane -marbitrary -mblock,pack '-m*:*:*' -mplane=0 -mblock,bogus -ma:b:c:d -mpack '-marbitrary -wgpu01' --power=x --power=level --power=a,level,b; do echo \"[$o]\"; sb -H $o --wrap true; done\nsbatch -H --mem-bind=help --wrap true; echo rc=$?\nprintf '#!/bin/bash\\n#SBATCH --power=x,y\\ntrue\\n' > pw.sh\nsb -H pw.sh\nfin"},
    # --time-min and --deadline at submission (slurmctld job_mgr.c _valid_job_part: the
    # minimum against MaxTime and -t, the deadline against now and now + the minimum; sbatch
    # opt.c _opt_verify: a deadline before --begin; slurm_opt.c arg_set_time_min: 0 is
    # INFINITE), then TimeMin= as kept (_job_create: 1 for a deadline without a time limit).
    {"name": "deadline_time_min_submit", "cmd": "for o in --deadline=now-1hour '--begin=now+2hours --deadline=now+1hour' '--deadline=now+5minutes --time-min=10 -t 30' '--time-min=20 -t 10' '-p debug --time-min=40' '--time-min=0 -t 30' '--time-min=0 --deadline=now+1hour' '--time-min=2 -t 30' '-p debug --deadline=now+1hour' --deadline=now+1hour '--deadline=now+1hour -t 10 --time-min=5' --time-min=60; do echo \"[$o]\"; sb -H $o --wrap true >/dev/null && echo \"$(scontrol show job ${J[-1]} | grep -oE '(TimeLimit|TimeMin)=[^ ]*|Deadline=(N/A|[0-9]{4})' | tr '\\n' ' ')$(squeue -h -j ${J[-1]} -O mintime)\"; done\nfin"},
    # A refused --test-only (sbatch.c: slurm_perror("allocation failure"), exit 1): the
    # controller's messages first; the ids it spends leave no job record (job_allocate
    # purges a will-run job), unlike a refused submission's FAILED one.
    {"name": "test_only_refused", "cmd": "sb -H --wrap true\nfor o in --gpus-per-node=9 '-p nosuch' --mincpus=65 -N9 --gres=foo:1 --gres=gpu:9; do echo \"[$o]\"; sbatch --test-only $o --wrap true; echo rc=$?; done\nsb -H --wrap true\necho \"ids spent: $((J2 - J1 - 1)) records: $(squeue -h -u alice -t all -o %i | awk -v a=$J1 -v b=$J2 '$1 > a && $1 < b' | wc -l)\"\nfin"},
    # More nodes than the partition has, under EnforcePartLimits=NO: accepted, pending
    # PartitionNodeLimit after the first cycle (job_mgr.c _part_access_check /
    # job_limits_check); with more than the whole cluster, refused.
    {"name": "nodes_over_partition", "cmd": "for o in -N5 '-N3 -p debug' '-N 2 -w gpu[01-03]' -N40; do sb -t 5 $o --wrap 'sleep 600' >/dev/null || { echo \"[$o] rc=$?\"; continue; }; for i in $(seq 50); do r=$(squeue -h -j ${J[-1]} -o '%T|%r|%D'); case $r in *PartitionConfig*|PENDING*None*) sleep 0.2;; *) break;; esac; done; echo \"[$o] $r\"; scancel ${J[-1]}; done\nfin"},
    # A node range on an idle cluster takes as many nodes as it may (cons_tres job_test:
    # up to the range's maximum, here the partition's 4).
    {"name": "node_range_takes_free_nodes", "cmd": "sb -t 5 -N2-5 --wrap 'sleep 600' >/dev/null\nwst $J1 RUNNING\nsqueue -h -j $J1 -o '%T|%D'\nfin"},
    # --constraint without node features (job_scheduler.c build_feature_list,
    # _valid_feature_list, _valid_node_feature): a name no node has, or bad syntax, is
    # ESLURM_INVALID_FEATURE after the id (no record stays); an empty one is kept as empty.
    {"name": "constraint_without_features", "cmd": "sb -H --wrap true\nfor c in foo 'a|b' '((a))' '&a' 'a*2' '[a|b]'; do echo \"[$c]\"; sbatch -H -C \"$c\" --wrap true; echo rc=$?; done\nsb -H -C '' --wrap true\necho \"ids spent: $((J2 - J1 - 1)) records: $(squeue -h -u alice -t all -o %i | awk -v a=$J1 -v b=$J2 '$1 > a && $1 < b' | wc -l)\"\nscontrol show job $J2 | grep -oE 'Features=[^ ]*'\nsqueue -h -j $J1,$J2 -o '%i|%f|' | m\nfin"},
    # --constraint with node features set by an admin (scontrol update NodeName=
    # AvailableFeatures=): the names checked on every node (case-sensitive), a job placed only
    # on nodes with its features (node_scheduler.c _match_feature: left to right, one level
    # of parentheses; `,` kept as `&`), too few such nodes in the partition refused at
    # submission with a FAILED record.
    {"name": "constraint_node_features", "user": "root", "cmd": FEAT_ON + ". /home/alice/x/lib.sh\ncd /home/alice/x\nfor c in 'ib,fast' 'slow|fast&ib' '(slow|ib)&fast' 'fast|slow&ib' 'fast&'; do sb --uid=alice -t 5 -C \"$c\" --wrap 'sleep 300' >/dev/null; wst ${J[-1]} RUNNING; echo \"[$c] $(squeue -h -j ${J[-1]} -o '%f|%N')\"; done\nfor o in '-N3 -C ib' '-p debug -C slow' '-C slow&fast' '-C IB' '-C ib|nosuch'; do echo \"[$o]\"; sbatch --uid=alice -t 5 $o --wrap true; echo rc=$?; done\nsb --uid=alice -t 5 -N2 -C ib --wrap 'sleep 300' >/dev/null\nwst ${J[-1]} RUNNING\nsqueue -h -j ${J[-1]} -o '%f|%N|%D'\nsqueue -h -u alice -t all -o '%i|%T|%f' | awk -F'|' -v a=$J5 -v b=$J6 '$1 > a && $1 < b {print $2 \"|\" $3}'\nfin\n" + FEAT_OFF},
    # Node counts and matching or (build_feature_list: `*N`, `[a|b]`), which Slurm places
    # (node_scheduler.c _get_req_features): pending in Flotilla's list (refused there).
    {"name": "constraint_counts_and_brackets", "user": "root", "cmd": FEAT_ON + ". /home/alice/x/lib.sh\ncd /home/alice/x\nfor o in \"-N2 -C ib*2\" \"-N2 -C [ib|slow]\" \"-C [ib*1&fast*1]\"; do sb --uid=alice -t 5 $o --wrap 'sleep 300' >/dev/null && { wst ${J[-1]} RUNNING; echo \"[$o] $(squeue -h -j ${J[-1]} -o '%f|%N|%D')\"; }; done\nfin\n" + FEAT_OFF},
    # The constraint in accounting (sacct -o Constraints: the job table's `constraints`, as
    # the job kept it; empty without one; slurmdbd fills it in after the end is shown, so the
    # case waits for it).
    {"name": "constraint_sacct", "user": "root", "cmd": FEAT_ON + ". /home/alice/x/lib.sh\ncd /home/alice/x\nsb --uid=alice -t 5 -C 'ib,fast' --wrap true >/dev/null\nsb --uid=alice -t 5 -C '' --wrap true >/dev/null\nsb --uid=alice -t 5 --wrap true >/dev/null\nsbatch --uid=alice -t 5 -N3 -C ib --wrap true; echo rc=$?\nsb --uid=alice -t 5 --wrap true >/dev/null\nwend $J1; wend $J2; wend $J3; wend $J4\nfor i in $(seq 100); do [ -n \"$(sacct -X -n -j $J1 -o constraints%20 | tr -d ' ')\" ] && break; sleep 0.2; done\nsacct -X -n -P -j $J1,$J2,$J3 -o jobid,state,constraints | m\nsacct -X -n -P -j $((J4 - 1)) -o state,constraints\nfin\n" + FEAT_OFF},
    # A node range takes the free nodes up to its maximum (cons_tres job_test.c: the
    # selection grows toward max_nodes while nodes are free), here 3 of 4 with gpu04 held;
    # the count then is the job's: NumNodes, NumTasks (one a node without -n), TRES, the
    # batch step's SLURM_NNODES, SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE.
    {"name": "node_range_partly_free", "cmd": "rm -f r.env\nprintf '#!/bin/bash\\nenv | grep -E \"^SLURM_(NNODES|JOB_NUM_NODES|NTASKS|NPROCS|TASKS_PER_NODE|JOB_CPUS_PER_NODE|JOB_NODELIST)=\" | sort > r.env.tmp; mv r.env.tmp r.env\\nsleep 600\\n' > r.sh\nsb -t 5 -N1 -w gpu04 --exclusive --wrap 'sleep 600' >/dev/null\nwst $J1 RUNNING\nsb -t 5 -N2-5 -o /dev/null r.sh >/dev/null\nwst $J2 RUNNING\nsqueue -h -j $J2 -o '%T|%D|%C|%N'\nscontrol show job $J2 | grep -oE '(NumNodes|NumCPUs|NumTasks|TRES)=[^ ]*'\nfor i in $(seq 100); do [ -s r.env ] && break; sleep 0.1; done\ncat r.env\nfin"},
    # A held node range shows its range and its request (NumNodes=2-5, one CPU); released, it
    # runs on the free nodes; sacct keeps the request (ReqTRES node=2) beside what it got.
    {"name": "node_range_held_then_run", "cmd": "sb -t 5 -H -N2-5 --wrap 'sleep 600' >/dev/null\nscontrol show job $J1 | grep -oE '(NumNodes|NumCPUs|NumTasks|TRES)=[^ ]*'\nsqueue -h -j $J1 -o '%T|%D|%C'\nscontrol release $J1\nwst $J1 RUNNING\nsqueue -h -j $J1 -o '%T|%D|%C|%N'\nscontrol show job $J1 | grep -oE '(NumNodes|NumCPUs|NumTasks|TRES)=[^ ]*'\nscancel $J1\nwend $J1\nfor i in $(seq 100); do [ \"$(sacct -X -n -j $J1 -o state%20 | tr -d ' ')\" = CANCELLED+ ] && break; sleep 0.2; done\nsacct -X -n -P -j $J1 -o NNodes,NCPUS,ReqTRES,AllocTRES,NodeList\nfin"},
    # A node range with GPUs on each node: every node taken brings its GPUs (TresPerNode
    # gres:gpu:2, TRES gres/gpu=6 on 3 nodes).
    {"name": "node_range_gpus_per_node", "cmd": "sb -t 5 -N1-3 --gpus-per-node=2 --wrap 'sleep 600' >/dev/null\nwst $J1 RUNNING\nsqueue -h -j $J1 -o '%T|%D|%C|%b|%N'\nscontrol show job $J1 | grep -oE '(NumNodes|NumCPUs|TRES)=[^ ]*'\nfin"},
    # A node range through srun and salloc: the allocation takes the free nodes (4 of 4, 3 of
    # 1-3), and its steps run one task a node on all of them.
    {"name": "node_range_srun_salloc", "cmd": "srun -t 5 -N2-5 bash -c 'echo $SLURM_NNODES $SLURM_NTASKS $SLURM_JOB_NUM_NODES $SLURM_STEP_NUM_NODES $SLURM_STEP_NUM_TASKS' | sort | uniq -c\nsalloc -t 5 -N1-3 bash -c 'echo $SLURM_NNODES $SLURM_JOB_NUM_NODES; srun hostname | wc -l' 2>&1 | grep -v '^salloc:'"},
    # Inside an allocation, a step's node range takes the allocation's nodes up to its
    # maximum (step_mgr: 2 of 3 for -N1-2, all 3 for -N2-5).
    {"name": "node_range_steps_in_allocation", "cmd": "salloc -t 5 -N3 bash -c 'srun -N1-2 hostname | wc -l; srun -N2-5 hostname | wc -l' 2>&1 | grep -v '^salloc:'"},
    # Tasks that do not fit the nodes asked for fail the select plugin's test without a
    # message of their own; a node's own minimum (-c, --ntasks-per-node x -c) above every
    # node's CPUs names the CPUs (node_scheduler.c _set_err_msg); -w with more tasks than
    # the node holds adds nodes.
    {"name": "tasks_over_the_nodes_asked", "cmd": "sb -N1 -n 65 --wrap true\nsb -N2 -n 129 --wrap true\nsb --ntasks-per-node=65 -n 65 --wrap true\nsb -N1 -n 33 -c 2 --wrap true\nsb -N1 --ntasks-per-node=33 -c 2 --wrap true\nsb -H -w gpu01 -n 65 --wrap true\nsqueue -h -u alice -o '%C|%D|%r' | m\nfin"},
]

# Area a02: output file name patterns (src/common/fd.c / slurmstepd io: expand_stdio_fields).
def pat(name, pattern, extra=""):
    return {"name": name, "cmd": "rm -rf o; mkdir o\nsb -o 'o/%s' %s --wrap true\nwend $J1\nls o | m\nfin" % (pattern, extra)}

A02 = [
    pat("job_user_name", "%j-%u-%x.out", "-J pn"),
    pat("padded_job_id", "p%5j.out"),
    pat("padding_cap", "q%12j.out"),
    pat("percent_percent", "r%%j.out"),
    pat("unknown_symbol", "s%q%j.out"),
    pat("node_index_task", "t-%n-%t-%s.out"),
    pat("backslash_disables", "u\\%j.out"),
    pat("trailing_percent", "v%j%"),
    pat("array_forms", "w-%A-%a-%3a.out", "--array=1-2"),
    pat("node_name_and_host", "x-%N.out"),
    pat("padding_zero_width", "y%0j.out"),
    pat("array_id_plain_job", "z-%A-%a.out"),
    # Added at stop 51 (src/common/fd.c / slurm_opt.c expand_stdio_fields).
    pat("jobstep_J", "b-%J.out"),
    pat("width_on_name_user", "e-%5x-%3u.out", "-J nm"),
    pat("nonarray_padded_a", "f-%4a-%8A.out"),
    pat("node_on_named_host", "g-%N-%n-%t.out", "-w gpu02"),
    pat("name_with_space", "h-%x.out", "-J 'a b'"),
    pat("width_leading_zero", "i%09j.out"),
    {"name": "error_separate", "cmd": "rm -rf o; mkdir o\nsb -o 'o/o-%j.out' -e 'o/e-%j.err' --wrap 'echo x; echo y >&2'\nwend $J1\nls o | m\ncat o/o-*.out o/e-*.err\nfin"},
    {"name": "missing_output_dir", "cmd": "rm -rf nodir\nsb -o nodir/x.out --wrap true\nwend $J1\nscontrol show job $J1 | grep -oE '(JobState|Reason|ExitCode|DerivedExitCode)=[^ ]*' | m\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nfin"},
]

# Area a03: exit status, end state and reason (slurmctld job_mgr.c: job_completion_logger,
# _job_complete; src/common/slurm_protocol_defs.c: job_reason_string).
def ends(name, wrap, extra=""):
    return {"name": name, "cmd": "sb %s --wrap %s\nwend $J1\nscontrol show job $J1 | grep -oE '(JobState|Reason|ExitCode|DerivedExitCode)=[^ ]*' | m\nsqueue -h -t all -j $J1 -o '%%T|%%r' | m\nfin" % (extra, wrap)}

# A job that ignores SIGTERM, running: a stop keeps it COMPLETING for KillWait (5 s).
STOPPING = "sb -t 10 --wrap 'trap \"\" TERM; sleep 300'\nwst $J1 RUNNING\n"
# near TIME LABEL: `LABEL now` when TIME is within 10 s of now, else `LABEL not now`.
NEAR = "near() { local t; t=$(date -d \"$1\" +%s 2>/dev/null || echo 0); t=$(( t - $(date +%s) )); [ ${t#-} -le 10 ] && echo \"$2 now\" || echo \"$2 not now\"; }\n"

A03 = [
    ends("exit_0", "'exit 0'"),
    ends("exit_3", "'exit 3'"),
    ends("exit_255", "'exit 255'"),
    ends("sigterm_self", "'kill -TERM $$'"),
    ends("sigsegv_self", "'kill -SEGV $$'"),
    ends("sigkill_self", "'kill -KILL $$'"),
    ends("sigusr1_self", "'kill -USR1 $$'"),
    ends("exit_129", "'exit 129'"),
    {"name": "cancel_running", "cmd": "sb --wrap 'sleep 300'\nwst $J1 RUNNING\nscancel $J1\nwend $J1\nscontrol show job $J1 | grep -oE '(JobState|Reason|ExitCode)=[^ ]*' | m\nfin"},
    {"name": "cancel_pending", "cmd": "sb --hold --wrap true\nscancel $J1\nwend $J1\nscontrol show job $J1 | grep -oE '(JobState|Reason|ExitCode)=[^ ]*' | m\nfin"},
    ends("nonexistent_command", "'/no/such/program'"),
    # A running job stopped by scancel or scontrol requeue shows COMPLETING at once (slurmctld
    # job_mgr.c: _job_signal, _job_requeue_op), not RUNNING until its processes are gone.
    {"name": "cancel_running_shown_at_once", "cmd": "sb --wrap 'sleep 300'\nwst $J1 RUNNING\nscancel $J1\nsqueue -h -t all -j $J1 -o '%T|%t|%r' | m\nwend $J1\nsqueue -h -t all -j $J1 -o '%T|%t|%r' | m\nfin"},
    {"name": "requeue_running_shown_at_once", "cmd": "sb --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol requeue $J1\nsqueue -h -t all -j $J1 -o '%T|%t|%r' | m\nwst $J1 PENDING\nsqueue -h -j $J1 -o '%T|%t|%r' | m\nfin"},
    # The stop is written to accounting at once and EndTime is the stop's time (job_mgr.c
    # _job_signal / _job_timed_out / _job_requeue_op: end_time = now, job_completion_logger),
    # while the node still ends the job (it ignores SIGTERM, so it stays COMPLETING KillWait s).
    {"name": "cancel_running_accounted_at_once",
     "cmd": STOPPING + "scancel $J1\nsqueue -h -t all -j $J1 -o '%T|%t|%r' | m\nsacct -n -X -P -j $J1 -o State,ExitCode | m\n" + NEAR + "near \"$(sacct -n -X -P -j $J1 -o End)\" sacct_end\nfin"},
    {"name": "cancel_running_end_time_is_now",
     "cmd": STOPPING + "scancel $J1\nscontrol show job $J1 | grep -o 'JobState=[^ ]* Reason=[^ ]*' | m\n" + NEAR + "near \"$(scontrol show job $J1 | grep -o 'EndTime=[^ ]*' | cut -d= -f2)\" end_time\nfin"},
    {"name": "timeout_completing_at_once",
     "cmd": "sb -t 1 --wrap 'trap \"\" TERM; sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 1500); do [ \"$(st $J1)\" = COMPLETING ] && break; sleep 0.1; done\nsqueue -h -t all -j $J1 -o '%T|%t|%r' | m\nscontrol show job $J1 | grep -o 'JobState=[^ ]* Reason=[^ ]*' | m\nsacct -n -X -P -j $J1 -o State,ExitCode | m\n" + NEAR + "near \"$(sacct -n -X -P -j $J1 -o End)\" sacct_end\nfin"},
    # scancel with a state filter and a job id checks the job first (scancel.c _verify_job_ids):
    # a job being stopped for good has ended (IS_JOB_FINISHED), so it is an invalid job id.
    {"name": "scancel_state_completing",
     "cmd": STOPPING + "scancel $J1\nscancel -t R $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscancel -t CG $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T|%t|%r' | m\nfin"},
    {"name": "requeue_running_accounted_at_once",
     "cmd": STOPPING + "scontrol requeue $J1\nsqueue -h -t all -j $J1 -o '%T|%t|%r' | m\nsacct -n -P -D -j $J1 -o State,ExitCode | m\nfin"},
    # The run's record is written at the requeue (REQUEUED, End = the requeue: _job_requeue_op
    # -> job_completion_logger(job_ptr, true)); the job's next record once its nodes are done
    # (batch_requeue_fini), and its next run's start and end in that record.
    {"name": "requeue_running_sacct_at_once",
     "cmd": STOPPING + "t0=$(date +%s)\nscontrol requeue $J1\nsacct -n -P -j $J1 -o State,ExitCode | m\nsacct -n -P -X -D -j $J1 -o State | m\ne=$(date -d \"$(sacct -n -X -P -D -j $J1 -o End | head -1)\" +%s 2>/dev/null || echo 0); d=$(( e - t0 )); [ $d -ge -1 ] && [ $d -le 2 ] && echo 'run end: at the requeue' || echo 'run end: not at the requeue'\nfin"},
    # (The script says when it ignores SIGTERM, so that the batch step is killed by SIGKILL.)
    {"name": "requeue_running_sacct_after_end",
     "cmd": "rm -f trapped\nsb -t 10 --wrap 'trap \"\" TERM; touch trapped; sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 600); do [ -e trapped ] && break; sleep 0.1; done\nt0=$(date +%s)\nscontrol requeue $J1\nfor i in $(seq 1200); do s=$(st $J1); [ \"$s\" != COMPLETING ] && [ \"$s\" != RUNNING ] && break; sleep 0.1; done\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nfor i in $(seq 150); do [ $(sacct -n -X -P -D -j $J1 -o State | wc -l) -ge 2 ] && break; sleep 0.1; done\nsacct -n -P -D -j $J1 -o State,ExitCode | m\nsacct -n -P -j $J1 -o State,ExitCode | m\ne=$(date -d \"$(sacct -n -X -P -D -j $J1 -o End | head -1)\" +%s 2>/dev/null || echo 0); d=$(( e - t0 )); [ $d -ge -1 ] && [ $d -le 2 ] && echo 'run end: at the requeue' || echo 'run end: not at the requeue'\nfin\nrm -f trapped"},
    {"name": "requeue_running_next_run_rows",
     "cmd": "sb -t 10 --wrap 'sleep 300'\nwst $J1 RUNNING\nt0=$(date +%s)\nscontrol requeue $J1\nwst $J1 PENDING\nscontrol update jobid=$J1 starttime=now 2>&1 | m\nfor i in $(seq 1800); do [ \"$(st $J1)\" = RUNNING ] && break; sleep 0.1; done\nst $J1\nfor i in $(seq 150); do [ \"$(sacct -n -X -P -D -j $J1 -o State | tail -1)\" = RUNNING ] && break; sleep 0.1; done\nsacct -n -P -D -j $J1 -o State,ExitCode | m\nsacct -n -P -j $J1 -o State,ExitCode | m\ne=$(date -d \"$(sacct -n -X -P -D -j $J1 -o End | head -1)\" +%s 2>/dev/null || echo 0); d=$(( e - t0 )); [ $d -ge -1 ] && [ $d -le 2 ] && echo 'run end: at the requeue' || echo 'run end: not at the requeue'\nfin"},
    # scancel's state filter compares the base state of jobs not finished (scancel.c
    # _filter_job_records): a run being requeued is PENDING|COMPLETING, so -t CG and -t R leave
    # it alone and -t PD cancels it; -t CG names no job at all.
    {"name": "scancel_state_requeue_completing",
     "cmd": STOPPING + "scontrol requeue $J1\nscancel -t CG $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscancel -t R $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nscancel -t PD $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nwend $J1\nsqueue -h -t all -j $J1 -o '%T' | m\nfin"},
    {"name": "scancel_state_cg_by_user",
     "cmd": STOPPING + "sb -t 10 --wrap 'trap \"\" TERM; sleep 300'\nwst $J2 RUNNING\nscancel $J1\nscancel -t CG -u alice 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1,$J2 -o '%i|%T' | m | sort\nfin"},
    # A pending job that can no longer end by its --deadline (job_scheduler.c deadline_ok, run
    # by the scheduling passes): DEADLINE, reason DeadLine, exit code 1 (0:1 in scontrol; 1:0
    # in sacct, as_mysql_job.c stores a 1 Slurm set as an exit status), started when it ended
    # (sacct Start None, mostly: its record races the end); a held job or one waiting on a
    # dependency is not tried (job_independent).
    {"name": "deadline_missed",
     "cmd": "sb -t 30 --deadline=now+5minutes --wrap 'sleep 100'\nwend $J1\nscontrol show job $J1 | grep -oE '(JobState|Reason|ExitCode|TimeLimit|TimeMin)=[^ ]*' | m\nsqueue -h -t all -j $J1 -o '%T|%t|%r|%l' | m\nfor i in $(seq 100); do [ -n \"$(sacct -n -X -P -j $J1 -o State)\" ] && break; sleep 0.1; done\nsacct -n -X -P -j $J1 -o State,ExitCode,Elapsed | m\n" + NEAR + "near \"$(scontrol show job $J1 | grep -o 'StartTime=[^ ]*' | cut -d= -f2)\" start_time\nnear \"$(squeue -h -t all -j $J1 -o %S)\" squeue_start\nfin"},
    {"name": "deadline_held_dependency",
     "cmd": "sb -t 30 --wrap 'sleep 300'\nwst $J1 RUNNING\nsb -t 30 --deadline=now+5minutes -d afterok:$J1 --wrap true\nsb -H -t 30 --deadline=now+5minutes --wrap true\nsb -t 30 --deadline=now+5minutes --wrap true\nwend $J4\nsqueue -h -t all -j $J2,$J3,$J4 -o '%i|%T|%r' | m | sort\nscontrol release $J3\nwend $J3\nsqueue -h -t all -j $J3 -o '%i|%T|%r' | m\nfin"},
    # A job that starts with a deadline runs until it at most (job_scheduler.c schedule: the
    # time limit becomes the minutes left when fewer; without -t the partition's DefaultTime,
    # else MaxTime, is the limit cut).
    {"name": "deadline_cuts_time_limit",
     "cmd": "sb -t 30 --time-min=2 --deadline=now+330 --wrap 'sleep 300'\nsb -p debug --deadline=now+330 --wrap 'sleep 300'\nsb -t 3 --deadline=now+330 --wrap 'sleep 300'\nwst $J1 RUNNING\nwst $J2 RUNNING\nwst $J3 RUNNING\nfor j in $J1 $J2 $J3; do echo \"$(squeue -h -j $j -O jobid,timelimit,mintime | m | tr -s ' ') $(scontrol show job $j | grep -oE '(TimeLimit|TimeMin)=[^ ]*|Deadline=(N/A|[0-9]{4})' | tr '\\n' ' ')\"; done\nfin"},
    # A job that ended without starting shows NumTasks=N/A unless a count was given
    # (job_mgr.c _pack_default_job_details: num_tasks, else min_nodes while pending, else the
    # allocated nodes, else NO_VAL).
    {"name": "ended_pending_numtasks", "cmd": "sb -H --wrap true\nsb -H -n 2 --wrap true\nsb -H -N 2 --wrap true\nsb -H --ntasks-per-node=2 --wrap true\nscancel $J1 $J2 $J3 $J4\nwend $J1 $J2 $J3 $J4\nfor j in $J1 $J2 $J3 $J4; do scontrol show job $j | grep -oE '(JobState|NumNodes|NumCPUs|NumTasks)=[^ ]*' | tr '\\n' ' '; echo; done\nfin"},
    # Added at stop 51.
    {"name": "sacct_exit_fields", "cmd": "sb --wrap 'exit 7'\nwend $J1\nfor i in $(seq 100); do sacct -n -X -j $J1 -o State -P | grep -q FAILED && break; sleep 0.2; done\nsacct -n -X -j $J1 -o State,ExitCode,DerivedExitCode -P | m\nfin"},
    {"name": "step_failure_job_ok", "cmd": "sb --wrap 'srun false; true'\nwend $J1\nscontrol show job $J1 | grep -oE '(JobState|Reason|ExitCode|DerivedExitCode)=[^ ]*' | m\nfin"},
    {"name": "step_signal_derived", "cmd": "sb --wrap 'srun bash -c \"kill -9 \\$\\$\"; exit 0'\nwend $J1\nscontrol show job $J1 | grep -oE '(JobState|ExitCode|DerivedExitCode)=[^ ]*' | m\nfin"},
    ends("exit_137", "'exit 137'"),
    ends("sigabrt_self", "'ulimit -c 0; kill -ABRT $$'"),
    {"name": "sacct_cancelled_exit", "cmd": "sb --wrap 'sleep 300'\nwst $J1 RUNNING\nscancel $J1\nwend $J1\nfor i in $(seq 100); do sacct -n -X -j $J1 -o State -P | grep -q CANCELLED && break; sleep 0.2; done\nsacct -n -X -j $J1 -o State,ExitCode -P | m\nfin"},
    {"name": "failed_step_sacct_rows", "cmd": "sb --wrap 'srun false; exit 2'\nwend $J1\nfor i in $(seq 100); do sacct -n -j $J1 -o State -P | grep -q FAILED && break; sleep 0.2; done\nsleep 1\nsacct -n -j $J1 -o JobID,State,ExitCode -P | sed \"s/^$J1/J1/\"\nfin"},
    ends("exit_in_subshell_signal", "'bash -c \"kill -TERM \\$\\$\"'"),
    # Added at stop 53. scancel of a step (scancel.c _cancel_step_id: SIGKILL unless -s,
    # slurm_kill_job_step; step_mgr.c job_step_signal): the step ends, its job goes on; the
    # step's errors (_verify_job_ids for a job not found, ESLURM_INVALID_JOB_ID for a step not
    # found; a pending job's step is passed over). The step's output is sorted: srun's
    # lines and the tasks' come in either order.
    {"name": "scancel_step_running", "cmd": "rm -f step.out\nsb -t 5 -o step.out --wrap 'srun sleep 300; echo srun_rc=$?; sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 300); do squeue -h -s -j $J1 -o %i | grep -q '\\.0$' && break; sleep 0.1; done\nscancel $J1.0; echo rc=$?\nfor i in $(seq 600); do grep -q srun_rc= step.out && break; sleep 0.1; done\nst $J1\nms < step.out | sort\nsqueue -h -s -j $J1 -o %i | ms\nfin\nfor i in $(seq 100); do sacct -n -j $J1 -o JobID -P | grep -q '\\.0$' && break; sleep 0.2; done\nsacct -n -j $J1 -o JobID,State,ExitCode -P | ms\nrm -f step.out"},
    {"name": "scancel_step_errors", "cmd": "sb -H -t 5 --wrap true\nsb -t 5 --wrap 'sleep 300'\nsb -t 5 --wrap true\nwst $J2 RUNNING\nwend $J3\nfor id in $J1.0 $J2.0 $J2.3 $J3.0 99999999.0 $J1.0,$J2.1 $J2.0,$J3; do scancel $id 2>&1 | ms; echo \"[$id] rc=${PIPESTATUS[0]}\" | ms; echo \"$(st $J1) $(st $J2)\"; done\nfin"},
    {"name": "scancel_step_signal", "cmd": "rm -f sig.out\nsb -t 5 -o sig.out --wrap 'srun bash -c \"trap \\\"echo usr1; exit 3\\\" USR1; while :; do sleep 0.2; done\"; echo srun_rc=$?; sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 300); do squeue -h -s -j $J1 -o %i | grep -q '\\.0$' && break; sleep 0.1; done\nsleep 0.5\nscancel -s USR1 $J1.0; echo rc=$?\nfor i in $(seq 600); do grep -q srun_rc= sig.out && break; sleep 0.1; done\nst $J1\nms < sig.out | sort\nsqueue -h -s -j $J1 -o %i | ms\nfin\nrm -f sig.out"},
    # Another user's step (step_mgr.c job_step_signal: ESLURM_USER_ID_MISSING), then root's.
    {"name": "scancel_step_other_user", "user": "root", "cmd": ". /home/alice/x/lib.sh\nsb --uid=alice -t 5 -D /home/alice/x -o /dev/null --wrap 'srun sleep 300; sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 300); do squeue -h -s -j $J1 -o %i | grep -q '\\.0$' && break; sleep 0.1; done\nrunuser -u bob -- scancel $J1.0 2>&1 | ms; echo \"bob rc=${PIPESTATUS[0]}\"\nrunuser -u bob -- scancel -s USR1 $J1.0 2>&1 | ms; echo \"bob USR1 rc=${PIPESTATUS[0]}\"\nsqueue -h -s -j $J1 -o %i | ms\nscancel $J1.0 2>&1 | ms; echo \"root rc=${PIPESTATUS[0]}\"\nfor i in $(seq 300); do squeue -h -s -j $J1 -o %i | grep -q '\\.0$' || break; sleep 0.1; done\nsqueue -h -s -j $J1 -o %i | ms\nst $J1\nfin"},
    # squeue -s with -o: the step format letters (squeue/opts.c parse_format with step_flag;
    # print.c _print_step_*), an invalid one reported and printed as text (no width on the
    # step id: the reference's ids have fewer digits than the replay's).
    {"name": "squeue_steps_format", "cmd": "sb -t 5 -o /dev/null --wrap 'srun -n1 --job-name=stp sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 300); do squeue -h -s -j $J1 -o %i | grep -q '\\.0$' && break; sleep 0.1; done\nsqueue -s -j $J1 -o '%A|%i|%j|%l|%N|%P|%U|%u' | ms\nsqueue -s -j $J1 -o '%.10j|%-8i|%5A|x%Zy' 2>&1 | ms\nsqueue -s -j $J1 -o '%.12S|%5M' | head -1\nfin"},    # The derived exit code (step_mgr.c _internal_step_complete: the highest wait status of the
    # srun steps; scontrol -d the controller's, sacct the database's, written at the job's end)
    # and a step's end state (as_mysql_step_complete: a signal CANCELLED, a status FAILED);
    # sacct's ExitCode less 128 from 128 up (print.c PRINT_EXITCODE).
    {"name": "derived_exit_code", "cmd": "rm -f d1.flag\nsb -t 5 -o /dev/null --wrap 'srun true; srun bash -c \"exit 7\"; srun false; srun bash -c \"kill -SEGV \\$\\$\"; touch d1.flag; sleep 300'\nsb -t 5 -o /dev/null --wrap 'srun bash -c \"kill -SEGV \\$\\$\"; srun bash -c \"kill -USR1 \\$\\$\"'\nwst $J1 RUNNING\nfor i in $(seq 300); do [ -e d1.flag ] && break; sleep 0.1; done\nscontrol show job -d $J1 | grep -oE '(JobState|ExitCode|DerivedExitCode)=[^ ]*' | m\nscancel $J1\nwend $J2\nwend $J1\nfor j in $J1 $J2; do scontrol show job -d $j | grep -oE '(JobState|ExitCode|DerivedExitCode)=[^ ]*' | m | tr '\\n' ' '; echo; done\nfor i in $(seq 100); do sacct -n -j $J1 -o JobID -P | grep -q '\\.3$' && break; sleep 0.2; done\nsacct -n -j $J1,$J2 -o JobID,State,ExitCode,DerivedExitCode -P | ms\nrm -f d1.flag"},    # Filters narrow named steps as they narrow named jobs (scancel.c _filter_job_records runs
    # on the loaded jobs before _cancel_step_id): a step of a job a filter leaves out is passed
    # over without a word, exit 0.
    {"name": "scancel_step_filtered", "cmd": "sb -t 5 -o /dev/null --wrap 'srun sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 300); do squeue -h -s -j $J1 -o %i | grep -q '\\.0$' && break; sleep 0.1; done\nfor f in '-u bob' '-p debug' '-t PENDING' '-n other' '-w gpu04' '-A other'; do scancel $f $J1.0 2>&1 | ms; echo \"[$f] rc=${PIPESTATUS[0]}\"; done\nsqueue -h -s -j $J1 -o %i | ms | sort\nscancel -n wrap -t RUNNING -u alice $J1.0; echo \"match rc=$?\"\nfor i in $(seq 300); do squeue -h -s -j $J1 -o %i | grep -q '\\.0$' || break; sleep 0.1; done\nsqueue -h -s -j $J1 -o %i | ms\nst $J1\nfin"},    # scontrol show step (info_job.c scontrol_print_step, job_step_info.c
    # slurm_sprint_job_step_info): a step over two nodes, two tasks on one node, the batch
    # step, the strtol reading of the operand (.batch is step 0), a step or a job not found.
    # Start times and srun's host and pid differ from run to run: replaced. (Steps using
    # fewer CPUs than their job has, --overlap steps and GPU steps are left out: Slurm 22.05
    # gives a step all its job's CPUs on a node unless --exact, and srun takes SLURM_GPUS.)
    {"name": "scontrol_show_step", "cmd": "X='s/StartTime=[^ ]+/StartTime=T/; s/SrunHost:Pid=[^ (]+:[0-9]+/SrunHost:Pid=H:P/'\nstep0() { for i in $(seq 300); do squeue -h -s -j $1 -o %i | grep -q '\\.0$' && break; sleep 0.1; done; }\nsb -t 5 -o /dev/null -N2 -n3 --wrap 'srun -n3 --job-name=stp sleep 300'\nwst $J1 RUNNING; step0 $J1\nscontrol show step $J1.0 | ms | sed -E \"$X\"\nscontrol -o show steps $J1 | ms | sed -E \"$X\"\nscontrol show step $J1.batch | ms | sed -E \"$X\" | head -1\nscontrol show step $J1.5 | ms; echo rc=${PIPESTATUS[0]}\nscancel $J1; wend $J1\nsb -t 5 -o /dev/null -n2 --wrap 'srun -n2 sleep 300'\nwst $J2 RUNNING; step0 $J2\nscontrol show step $J2.0 | ms | sed -E \"$X\"\nscancel $J2; wend $J2\nsb -H --wrap true\nscontrol show step $J3 | m; echo rc=${PIPESTATUS[0]}\nscontrol show step 99999999.0; echo rc=$?\nscontrol show step $J2 | m; echo rc=${PIPESTATUS[0]}\nfin"},
    # sacct's Reason (sacct/print.c PRINT_REASON: the job's state_reason_prev, which
    # job_scheduler.c build_job_queue sets on each pass to a pending job's reason unless it is
    # None, Priority or Resources, and which goes to the database with the job's start): a
    # held job released after a pass saw it (sdiag's count of scheduling cycles marks a
    # pass), a job that waited on a dependency, one that started at once, and a requeued job
    # (cleared at the requeue; its new run waits out its begin time). (A job still pending is
    # left out: its record gets the value when slurmctld's database-index thread sends it.)
    {"name": "sacct_reason", "cmd": "sb -H --wrap true\nsb -t 5 -o /dev/null --wrap 'sleep 3'\nsb -d afterok:$J2 -o /dev/null --wrap true\nsb -o /dev/null --wrap true\nc=$(sdiag | awk '/Total cycles/ {print $3; exit}')\nfor i in $(seq 600); do [ \"$(sdiag | awk '/Total cycles/ {print $3; exit}')\" != \"$c\" ] && break; sleep 0.1; done\nscontrol release $J1\nwend $J1 $J2 $J3 $J4\nsacct -n -X -j $J1,$J2,$J3,$J4 -o JobID,State,Reason -P | m\nsb -t 5 -o /dev/null --wrap 'sleep 300'\nwst $J5 RUNNING\nscontrol requeue $J5\nfor i in $(seq 3000); do [ \"$(sacct -n -X -D -j $J5 -o State -P | tr '\\n' ' ')\" = 'REQUEUED RUNNING ' ] && break; sleep 0.1; done\nsacct -n -X -D -j $J5 -o JobID,State,Reason -P | m\nfin"},
    # A step still running when its job is cancelled (step_mgr.c: the step's own completion,
    # each node's slurmstepd reporting, comes before the job's cleanup_completing /
    # delete_step_records, and is what is kept): the step ends CANCELLED 0:15 in sacct, and
    # its status counts in the derived exit code scontrol shows, not in the job's accounting
    # record (written at the job's end).
    {"name": "cancel_job_running_step", "cmd": "sb -t 5 -o /dev/null --wrap 'srun true; srun sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 300); do squeue -h -s -j $J1 -o %i | grep -q '\\.1$' && break; sleep 0.1; done\nscancel $J1\nwend $J1\nfor i in $(seq 100); do sacct -n -j $J1.1 -o ExitCode -P | grep -q '^0:15$' && break; sleep 0.2; done\nsacct -n -j $J1 -o JobID,State,ExitCode,DerivedExitCode -P | ms\nscontrol show job -d $J1 | grep -oE '(JobState|ExitCode|DerivedExitCode)=[^ ]*' | m\nfin"},    # A step's CPUs (Slurm 22.05's --whole default: srun/libsrun/launch.c
    # _create_job_step_create_message sets SSF_WHOLE unless --exact, which -c and --exclusive
    # imply; step_mgr.c _pick_step_nodes leaves out a node where another step holds CPUs,
    # _step_alloc_lps gives the step every CPU of the job there): a second step waits for the
    # first (srun's "step creation temporarily disabled"); each holds the job's 4 CPUs.
    {"name": "step_whole_cpus", "cmd": "rm -f a.flag w.out\ncat > w.sh <<'EOF'\n#!/bin/bash\nsrun -n1 bash -c 'touch a.flag; sleep 2' &\nwhile [ ! -e a.flag ]; do sleep 0.1; done\nscontrol show step $SLURM_JOB_ID.0 | grep -oE '(NumCPUs|TRES)=[^ ]*'\nsrun -n1 true; echo rc=$?\nwait\nEOF\nsb -N1 -n4 -t 5 -o w.out w.sh\nwend $J1\nms < w.out\nsacct -n -j $J1 -o JobID,AllocCPUS,AllocTRES -P | ms\nfin\nrm -f a.flag w.out w.sh"},
    # --exact steps (and -c, which implies it) hold their tasks' CPUs and run side by side; a
    # whole step waits while any of them runs on its node.
    {"name": "step_exact_cpus", "cmd": "rm -f a.flag w.out\ncat > w.sh <<'EOF'\n#!/bin/bash\nsrun --exact -n1 bash -c 'touch a.flag; sleep 3' &\nwhile [ ! -e a.flag ]; do sleep 0.1; done\nscontrol show step $SLURM_JOB_ID.0 | grep -oE '(NumCPUs|TRES)=[^ ]*'\nsrun --exact -n2 true; echo exact rc=$?\nsrun -c2 -n1 true; echo c2 rc=$?\nsrun -n1 true; echo whole rc=$?\nwait\nEOF\nsb -N1 -n4 -t 5 -o w.out w.sh\nwend $J1\nms < w.out\nsacct -n -j $J1 -o JobID,AllocCPUS,AllocTRES -P | ms\nfin\nrm -f a.flag w.out w.sh"},
    # A whole step goes to a node of the job no other step uses (_pick_step_nodes clears the
    # busy ones from the nodes it may pick); one that needs every node waits.
    {"name": "step_whole_other_node", "cmd": "rm -f a.flag w.out\ncat > w.sh <<'EOF'\n#!/bin/bash\nsrun -N1 -n1 bash -c 'touch a.flag; sleep 3' &\nwhile [ ! -e a.flag ]; do sleep 0.1; done\nsrun -N1 -n1 true; echo one rc=$?\nsrun -N2 -n2 true; echo two rc=$?\nwait\nEOF\nsb -N2 --ntasks-per-node=2 -t 5 -o w.out w.sh\nwend $J1\nms < w.out\nsacct -n -j $J1 -o JobID,NNodes,AllocCPUS,AllocTRES -P | ms\na=$(sacct -n -j $J1.0 -o NodeList -P); b=$(sacct -n -j $J1.1 -o NodeList -P)\n[ -n \"$a\" ] && [ \"$a\" != \"$b\" ] && echo steps 0 and 1 on different nodes\nfin\nrm -f a.flag w.out w.sh"},    # srun's input environment (libsrun/opt.c env_vars): SLURM_EXACT is --exact,
    # SRUN_CPUS_PER_TASK is -c (and so --exact too).
    {"name": "step_exact_env", "cmd": "rm -f a.flag w.out\ncat > w.sh <<'EOF'\n#!/bin/bash\nSLURM_EXACT=1 srun -n1 bash -c 'touch a.flag; sleep 3' &\nwhile [ ! -e a.flag ]; do sleep 0.1; done\nSRUN_CPUS_PER_TASK=2 srun -n1 true; echo rc=$?\nwait\nEOF\nsb -N1 -n4 -t 5 -o w.out w.sh\nwend $J1\nms < w.out\nsacct -n -j $J1 -o JobID,AllocCPUS,AllocTRES -P | ms\nfin\nrm -f a.flag w.out w.sh"},
]

# Area a05: dependencies (slurmctld job_scheduler.c: update_job_dependency /
# _parse_dependency_str / _depend_list2str).
def dep(name, spec, pre="sb --hold --wrap true\nsb --hold --wrap true\n"):
    return {"name": name, "cmd": pre + "sb --hold -d %s --wrap true || { fin; exit 0; }\nsqueue -h -j ${J[-1]} -o '%%E|%%r' 2>&1 | m\nscontrol show job ${J[-1]} 2>&1 | grep -o 'Dependency=.*' | m\nfin" % spec}

A05 = [
    dep("afterok_two", "afterok:$J1:$J2"),
    dep("mixed_comma", "afterany:$J1,afternotok:$J2"),
    dep("question_or", "afterok:$J1?afterany:$J2"),
    dep("bare_ids", "$J1:$J2"),
    dep("after_plus_minutes", "after:$J1+5:$J2"),
    dep("singleton_and_after", "singleton,afterok:$J1"),
    dep("unknown_type", "afterfoo:$J1"),
    dep("missing_job", "afterok:999999"),
    dep("aftercorr_array", "aftercorr:$J1", pre="sb --hold --array=1-3 --wrap true\n"),
    dep("array_task_dep", "afterok:${J1}_2", pre="sb --hold --array=1-3 --wrap true\n"),
    dep("empty_list_item", "afterok:$J1,,afterany:$J2"),
    dep("dependency_on_self_typo", "afterok:"),
    dep("expand_dep", "expand:$J1"),
    dep("afterany_whole_array", "afterany:${J1}_*", pre="sb --hold --array=1-3 --wrap true\n"),
    # --kill-on-invalid-dep (job_mgr.c handle_invalid_dependency, _kill_dependent): yes
    # cancels a job whose dependency can never be met (yes wins over a later no), no or
    # nothing leaves it pending, DependencyNeverSatisfied.
    {"name": "kill_on_invalid_dep", "cmd": "sb --wrap false\nsb --kill-on-invalid-dep=yes -d afterok:$J1 --wrap true\nsb -d afterok:$J1 --wrap true\nsb --kill-on-invalid-dep=yes --kill-on-invalid-dep=no -d afterok:$J1 --wrap true\nsb --kill-on-invalid-dep=no -d afterok:$J1 --wrap true\nwst $J2 CANCELLED\nwst $J4 CANCELLED\nsqueue -h -t all -u alice -o '%i|%T|%r' | m | grep '^J' | sort\nscontrol show job $J2 | grep -oE '(JobState|Reason|Dependency|KillOInInvalidDependent)=[^ ]*' | m\nfin"},
    # Added at stop 51.
    dep("duplicate_ids", "afterok:$J1:$J1"),
    dep("after_plus_zero", "after:$J1+0"),
    dep("uppercase_type", "AFTEROK:$J1"),
    dep("array_task_range", "afterok:${J1}_[1-2]", pre="sb --hold --array=1-3 --wrap true\n"),
    dep("after_plus_bad", "after:$J1+x"),
    dep("comma_and_question_mixed", "afterok:$J1?afterany:$J2,afternotok:$J1"),
    dep("singleton_alone", "singleton"),
    dep("trailing_colon", "afterok:$J1:"),
    dep("burstbuffer", "afterburstbuffer:$J1"),
]

# Area a06: arrays (src/common/slurm_opt.c / sbatch: --array; slurmctld job_mgr.c:
# _valid_array_inx, _copy_job_desc_to_job_record; slurm_protocol_defs.c / squeue print: array
# task strings).
# Every record of array J1 (`squeue -r`), sorted: its id, `own` when it has the array's job id
# (%A), else `new`, its time limit and reason.
OWN = "squeue -h -r -t PD,R -j $J1 -o '%i %A %l %r' | awk -v j=$J1 '{print $1, ($2 == j ? \"own\" : \"new\"), $3, $4}' | m | sort\n"
# The same with the reason shown only when it is a hold (others wait for Slurm's next pass:
# None until it, BeginTime after).
OWNH = "squeue -h -r -t PD,R -j $J1 -o '%i %A %l %r' | awk -v j=$J1 '{print $1, ($2 == j ? \"own\" : \"new\"), $3, ($4 ~ /^JobHeld/ ? $4 : \"-\")}' | m | sort\n"


def arr(name, spec, fmt="%i|%r"):
    return {"name": name, "cmd": "sb --hold --array='%s' --wrap true || exit 0\nsqueue -h -j $J1 -o '%s' 2>&1 | m\nsqueue -h -r -j $J1 -o '%%i' 2>&1 | m | head -20\nfin" % (spec, fmt)}

A06 = [
    arr("step_range", "1-10:3"),
    arr("list_and_range", "1,3,5-7"),
    arr("throttle", "0-15%4"),
    arr("reversed_range", "5-1"),
    arr("negative", "-1"),
    arr("too_large", "10001"),
    arr("max_index", "10000"),
    arr("brackets", "[1-3]"),
    arr("step_without_range", "4:2"),
    arr("zero_step", "1-5:0"),
    arr("duplicates", "3,1,2,3"),
    arr("throttle_zero", "1-3%0"),
    arr("list_with_steps", "1-7:2,10"),
    arr("single", "7"),
    # squeue -j naming tasks of the pending remainder (squeue/print.c _filter_job, partial_array).
    {"name": "task_of_pending_remainder",
     "cmd": "sb --hold --array='0-5%2' --wrap true\nsqueue -h -j ${J1}_3 -o '%i|%K|%F' | m\nsqueue -h -j ${J1}_3,${J1}_5,${J1}_4 -o '%i|%K' | m\nsqueue -h -j ${J1}_1,${J1}_3 -o '%i|%K' | m\nsqueue -h -j ${J1}_3,$J1 -o '%i' | m\nsqueue -h -j $J1,${J1}_3 -o '%i' | m\nfin"},
    # job_mgr.c job_array_split: a split that leaves the array record with one pending task
    # makes the record that task's (the array's id, `A_T`); a cancel does not
    # (job_str_signal); hold/release of some pending tasks split them (update_job_str). `own`:
    # the record has the array's id (%A), `new`: an id of its own.
    {"name": "start_leaves_last_task",
     "cmd": "sb -t 5 --array='0-2%1' --wrap 'sleep 300'\nwst ${J1}_0 RUNNING\nscancel ${J1}_0\nwst ${J1}_1 RUNNING\n" + OWN + "sleep 6\nscancel $J1\nwend $J1\nsqueue -h -t all -r -j $J1 -o '%i|%T|%r' | m | sort\nsacct -X -n -P -o JobID,State | m | grep '^J1_' | sort\nsacct -X -n -P -j $J1 -o JobID,State | m | sort\nfin"},
    {"name": "cancel_leaves_last_task",
     "cmd": "sb --hold --array='0-2%2' --wrap true\nscancel ${J1}_[0-1]\nsqueue -h -r -j $J1 -o '%i|%T|%r' | m\nsqueue -h -j $J1 -o '%i' | m\nfin"},
    {"name": "update_leaves_last_task",
     "cmd": "sb --hold -t 10 --array='0-1' --wrap true\nscontrol update jobid=${J1}_0 TimeLimit=3\n" + OWN + "fin"},
    {"name": "hold_one_pending_task",
     "cmd": "sb --begin=now+3600 --array='0-2' --wrap true\nscontrol hold ${J1}_1\n" + OWNH + "scontrol release ${J1}_1\nsqueue -h -r -j $J1 -o '%i %A %u' | awk -v j=$J1 '{print $1, ($2 == j ? \"own\" : \"new\"), $3}' | m | sort\nfin"},
    {"name": "hold_leaves_last_task",
     "cmd": "sb --begin=now+3600 --array='0-1' --wrap true\nscontrol hold ${J1}_0\n" + OWNH + "fin"},
    # scontrol requeue of a pending task does not split it (job_requeue2 finds the array
    # record, _job_requeue_op refuses a pending job); requeuehold neither.
    {"name": "requeue_pending_task",
     "cmd": "sb --begin=now+3600 --array='0-2' --wrap true\nscontrol requeue ${J1}_1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol requeuehold ${J1}_1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\n" + OWNH + "fin"},
    # A requeued task waiting out its requeue delay holds no throttle slot
    # (job_array_start_test counts running tasks): task 1 starts, leaving task 2 as the array
    # record's.
    {"name": "requeue_task_frees_its_slot",
     "cmd": "sb -t 5 --array='0-2%1' --wrap 'sleep 300'\nwst ${J1}_0 RUNNING\nscontrol requeue ${J1}_0\nwst ${J1}_1 RUNNING\nsqueue -h -r -t PD,R -j $J1 -o '%i %A %T' | awk -v j=$J1 '{print $1, ($2 == j ? \"own\" : \"new\"), $3}' | m | sort\nfin"},
    # Every requeue naming an array or its tasks is answered per task in the array-errors form
    # (job_mgr.c job_requeue2, _resp_array_add; scontrol_requeue prints `A_T: <error>`).
    {"name": "requeue_array_running_and_pending",
     "cmd": "sb -t 5 --array='0-2%1' --wrap 'sleep 300'\nwst ${J1}_0 RUNNING\nscontrol requeue $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nfin"},
    {"name": "requeue_missing_task",
     "cmd": "sb --begin=now+3600 --array='0-2' --wrap true\nscontrol requeue ${J1}_7 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nfin"},
    {"name": "requeue_no_requeue_tasks",
     "cmd": "sb -t 5 --no-requeue --array='0-1' --wrap 'sleep 300'\nwst ${J1}_0 RUNNING\nwst ${J1}_1 RUNNING\nscontrol requeue ${J1}_0 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol requeue $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nfin"},
    {"name": "requeue_finished_array",
     "cmd": "sb --array='0-1' --wrap true\nwend $J1\nscontrol requeuehold $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t PD -j $J1 -o '%i %r' | m | sort\nfin"},
    {"name": "requeue_task_list",
     "cmd": "sb --begin=now+3600 --array='0-3' --wrap true\nscontrol requeue \"${J1}_[0,2,5]\" 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nfin"},
    # The other forms scontrol requeue answers (job_mgr.c _job_requeue_op, job_requeue2): an
    # ended array or task or job is requeued at once, a pending or held job is refused, a job
    # being stopped is accepted (pending once its nodes are done), one being requeued is
    # pending already, an allocation that is not a batch job is refused (ESLURM_BATCH_ONLY).
    # Right after an ended job's requeue Slurm still shows the reason of its end until its next
    # scheduler pass sets BeginTime (job_independent); Flotilla shows BeginTime at once, so the
    # first three print the state only.
    {"name": "requeue_array_all_ended",
     "cmd": "sb --array='0-1' --wrap true\nwend $J1\nscontrol requeue $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t all -j $J1 -o '%i %T' | m | sort\nfin"},
    {"name": "requeue_finished_task",
     "cmd": "sb --array='0-1' --wrap true\nwend $J1\nscontrol requeue ${J1}_1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t all -j $J1 -o '%i %T' | m | sort\nfor i in $(seq 150); do [ $(sacct -n -X -P -D -j ${J1}_1 -o State | wc -l) -ge 2 ] && break; sleep 0.1; done\nsacct -n -P -X -D -j ${J1}_1 -o JobID,State,ExitCode | m\nfin"},
    {"name": "requeue_finished_job",
     "cmd": "sb --wrap true\nwend $J1\nscontrol requeue $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T' | m\nfor i in $(seq 150); do [ $(sacct -n -X -P -D -j $J1 -o State | wc -l) -ge 2 ] && break; sleep 0.1; done\nsacct -n -P -X -D -j $J1 -o State,ExitCode | m\nfin"},
    {"name": "requeue_pending_and_held",
     "cmd": "sb --begin=now+3600 --wrap true\nsb --hold --wrap true\nscontrol requeue $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol requeue $J2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol requeuehold $J2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%T|%r' | m | sort\nfin"},
    {"name": "requeue_cancelled_completing",
     "cmd": STOPPING + "scancel $J1\nscontrol requeue $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nfor i in $(seq 1200); do s=$(st $J1); [ \"$s\" != COMPLETING ] && [ \"$s\" != RUNNING ] && break; sleep 0.1; done\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nfor i in $(seq 150); do [ $(sacct -n -X -P -D -j $J1 -o State | wc -l) -ge 2 ] && break; sleep 0.1; done\nsacct -n -P -X -D -j $J1 -o State,ExitCode | m\nfin"},
    {"name": "requeue_twice_while_completing",
     "cmd": STOPPING + "scontrol requeue $J1\nscontrol requeue $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol requeuehold $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nfor i in $(seq 1200); do s=$(st $J1); [ \"$s\" != COMPLETING ] && [ \"$s\" != RUNNING ] && break; sleep 0.1; done\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nfin"},
    {"name": "requeue_allocation",
     "cmd": "rm -f sid\nsalloc -t 5 bash -c 'echo $SLURM_JOB_ID > sid; sleep 120' >/dev/null 2>&1 &\nfor i in $(seq 600); do [ -s sid ] && break; sleep 0.1; done\nJ+=(\"$(cat sid)\"); J1=${J[0]}\nscontrol requeue $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nfin\nwait\nrm -f sid"},
    {"name": "requeue_special_exit",
     "cmd": "sb -t 10 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol requeuehold State=SpecialExit $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nfor i in $(seq 1200); do s=$(st $J1); [ \"$s\" != COMPLETING ] && [ \"$s\" != RUNNING ] && break; sleep 0.1; done\nsqueue -h -t all -j $J1 -o '%T|%t|%r' | m\nscontrol show job $J1 | grep -o 'JobState=[^ ]* Reason=[^ ]*' | m\nfin"},
    # State=SpecialExit on a finished job (pending at once): the short form, squeue's -t
    # (SE and SPECIAL_EXIT match the flag, PD does not; listed by default), priority 0.
    {"name": "special_exit_filters",
     "cmd": "sb --wrap true\nwend $J1\nscontrol requeuehold state=se $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T|%t|%r|%Q' | m\necho \"SE: $(squeue -h -t SE -o %i | m)\"\necho \"SPECIAL_EXIT: $(squeue -h -t special_exit -o %i | m)\"\necho \"PD: $(squeue -h -t PD -o %i | m)\"\necho \"default: $(squeue -h -o %i | m)\"\nfin"},
    # `scontrol release` clears the flag (_release_job_rec): PENDING.
    {"name": "special_exit_release",
     "cmd": "sb --wrap true\nwend $J1\nscontrol requeuehold State=SpecialExit $J1\nscontrol release $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T|%t' | m\nscontrol show job $J1 | grep -o 'JobState=[^ ]*' | m\nfin"},
    # sacct: the state is stored without its flags (as_mysql_job_start: JOB_STATE_BASE).
    {"name": "special_exit_sacct",
     "cmd": "sb --wrap true\nwend $J1\nscontrol requeuehold State=SpecialExit $J1\nfor i in $(seq 150); do [ $(sacct -n -X -P -D -j $J1 -o State | wc -l) -ge 2 ] && break; sleep 0.1; done\nsacct -n -P -X -D -j $J1 -o State,ExitCode | m\nsacct -n -P -X -j $J1 -o State,ExitCode | m\nfin"},
    # A State= value that is not SpecialExit ends the flags: it is taken for a job id.
    {"name": "requeuehold_bad_state",
     "cmd": "sb --wrap true\nwend $J1\nscontrol requeuehold State=Bogus $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -t all -j $J1 -o '%T' | m\nfin"},
    # scontrol update ArrayTaskThrottle= (job_mgr.c _update_job: the array's max_run_tasks,
    # kept by its first record; update_job.c: strtoll, a negative value refused): raised on a
    # running array, more tasks start; every record of the array shows it (pack_job packs the
    # first record's max_run_tasks for the others).
    {"name": "update_throttle_raise",
     "cmd": "sb -t 5 --array='1-4%1' --wrap 'sleep 300'\nwst ${J1}_1 RUNNING\nscontrol show job $J1 | grep -oE 'ArrayTaskId=[^ ]*( ArrayTaskThrottle=[^ ]*)?' | sort\nscontrol update jobid=$J1 ArrayTaskThrottle=3 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nfor i in $(seq 600); do [ $(squeue -h -r -t R -j $J1 | wc -l) -ge 3 ] && break; sleep 0.1; done\nsqueue -h -r -j $J1 -o '%i|%T|%r' | m | sort\nscontrol show job $J1 | grep -oE 'ArrayTaskId=[^ ]*( ArrayTaskThrottle=[^ ]*)?' | sort\nfin"},
    # The values: negative refused by scontrol, letters are 0 (no throttle), digits then
    # letters their number, empty 0; a pending task named alone is split off and keeps the
    # array's throttle; a job that is no array takes the other changes.
    {"name": "update_throttle_values",
     "cmd": "sb --hold -t 5 --array='1-4%2' --wrap true\nfor v in -1 abc 2x ''; do scontrol update jobid=$J1 ArrayTaskThrottle=$v 2>&1 | m; echo \"[$v] rc=${PIPESTATUS[0]}\"; scontrol show job $J1 | grep -oE 'ArrayTaskId=[^ ]*( ArrayTaskThrottle=[^ ]*)?' | sort; done\nscontrol update jobid=${J1}_4 ArrayTaskThrottle=3 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol show job $J1 | grep -oE 'ArrayTaskId=[^ ]*( ArrayTaskThrottle=[^ ]*)?' | sort\nsb --hold -t 5 --wrap true\nscontrol update jobid=$J2 ArrayTaskThrottle=2 TimeLimit=4 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J2 -o '%l' | m\nfin"},
    # An update of a whole array goes record by record (update_job_str): the ended task is
    # refused, the others changed; scontrol prints every outcome (A_1: ..., A_2-4: No error)
    # and exits 1. A task named alone that ended: its error in the same form.
    {"name": "update_array_mixed_results",
     "cmd": "sb -t 5 --array='1-4%2' --wrap '[ $SLURM_ARRAY_TASK_ID = 1 ] || sleep 300'\nwst ${J1}_1 COMPLETED\nwst ${J1}_3 RUNNING\nscontrol update jobid=$J1 TimeLimit=3 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t all -j $J1 -o '%i|%T|%l' | m | sort\nscontrol update jobid=${J1}_1 TimeLimit=2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol update jobid=\"${J1}_[2,9]\" TimeLimit=2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol update jobid=$J1 Partition=nope 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t all -j $J1 -o '%i|%T|%l|%P' | m | sort\nfin"},
    # The array's first record ended (its last task to start, task 2, ended at once): it takes
    # the throttle and nothing else, with success; the running task takes the time limit.
    {"name": "update_throttle_ended_first_record",
     "cmd": "sb -t 5 --array='1-2' --wrap '[ $SLURM_ARRAY_TASK_ID = 2 ] || sleep 300'\nwst ${J1}_2 COMPLETED\nwst ${J1}_1 RUNNING\nscontrol update jobid=$J1 ArrayTaskThrottle=5 TimeLimit=2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t all -j $J1 -o '%i|%A|%T|%l' | awk -v j=$J1 -F'|' '{print $1, ($2 == j ? \"own\" : \"new\"), $3, $4}' | m | sort\nscontrol show job $J1 | grep -oE 'ArrayTaskId=[^ ]*( ArrayTaskThrottle=[^ ]*)?' | sort\nfin"},
    # scontrol hold of a running job (job_mgr.c _update_job, priority 0 by _hold_job_rec): it
    # keeps running with priority 0 and reason JobHeldUser; release numbers it again and
    # clears the reason; an ended job is refused (Job has already finished).
    {"name": "hold_running_job",
     "cmd": "sb -t 5 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol hold $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1 -o '%T|%r|%Q' | m\nscontrol show job $J1 | grep -oE 'Priority=[0-9]+|JobState=[^ ]* Reason=[^ ]*' | m\nscontrol release $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\np=$(squeue -h -j $J1 -o %Q); echo \"$(squeue -h -j $J1 -o '%T|%r') nonzero: $([ \"$p\" -gt 0 ] && echo yes)\"\nsb --wrap true\nwend $J2\nscontrol hold $J2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol release $J2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nfin"},
    # scontrol hold and release of an array (scontrol_hold: an update per record,
    # update_job_str): record by record in the array-errors form, without scontrol's
    # slurm_suspend line; the running tasks are held too. (A released pending task's reason is
    # left out: None until the next pass, then JobArrayTaskLimit, a race.)
    {"name": "hold_array_mixed_results",
     "cmd": "sb -t 5 --array='1-4%2' --wrap '[ $SLURM_ARRAY_TASK_ID = 1 ] || sleep 300'\nwst ${J1}_1 COMPLETED\nwst ${J1}_3 RUNNING\nscontrol hold $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t all -j $J1 -o '%i|%T|%r' | m | sort\nscontrol release $J1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol hold ${J1}_1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol hold ${J1}_2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol hold \"${J1}_[3,9]\" 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol uhold ${J1}_4 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t all -j $J1 -o '%i|%T|%r' | m | sort\nscontrol release ${J1}_4 ${J1}_2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -r -t all -j $J1 -o '%i|%T|%r' | awk -F'|' '{print $1 \"|\" $2 \"|\" ($2 == \"PENDING\" ? \"-\" : $3)}' | m | sort\nfin"},
    # Another user's array (job_mgr.c _update_job checks the owner record by record): hold,
    # release and update answer in the array-errors form, A_1-3: Invalid user id.
    {"name": "other_users_array", "user": "root",
     "cmd": ". /home/alice/x/lib.sh\nsb --uid=alice -H --array=1-3 -t 5 --wrap true -D /home/alice/x\nfor c in \"hold $J1\" \"release ${J1}_2\" \"update jobid=$J1 TimeLimit=3\"; do runuser -u bob -- scontrol $c 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"; done\nsqueue -h -r -j $J1 -o '%i|%l|%r' | m | sort\nfin"},
]

# Area a09: scontrol update of jobs (slurmctld job_mgr.c: update_job / _update_job;
# scontrol/update_job.c: scontrol_update_job).
def upd(name, change, user="alice", pre="sb --hold -t 60 --wrap true\n", fmt="%l|%j|%P|%y"):
    return {"name": name, "user": user,
            "cmd": pre + "scontrol update jobid=$J1 %s 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1 -o '%s' | m\nfin" % (change, fmt)}

A09 = [
    upd("timelimit_plus", "TimeLimit=+30"),
    upd("timelimit_minus", "TimeLimit=-10"),
    upd("timelimit_days", "TimeLimit=1-0"),
    upd("timelimit_minus_too_much", "TimeLimit=-90"),
    upd("user_raises_limit_over_partition", "TimeLimit=3-0"),
    upd("user_sets_priority", "Priority=100"),
    upd("user_negative_nice", "Nice=-5"),
    upd("user_nice", "Nice=50"),
    upd("name_and_partition", "JobName=renamed Partition=debug"),
    upd("bad_keyword", "Foo=bar"),
    upd("bad_timelimit", "TimeLimit=abc"),
    upd("running_timelimit_plus", "TimeLimit=+5", pre="sb -t 60 --wrap 'sleep 300'\nwst $J1 RUNNING\n"),
    upd("running_partition", "Partition=debug", pre="sb -t 20 --wrap 'sleep 300'\nwst $J1 RUNNING\n"),
    upd("running_numnodes", "NumNodes=2", pre="sb -t 20 --wrap 'sleep 300'\nwst $J1 RUNNING\n"),
    # StartTime= (update_job.c: parse_time's line, no change counted; "No changes
    # specified" when nothing else is changed).
    {"name": "starttime_specs", "cmd": "sb -H -t 60 --wrap true\nfor v in bogus now+x '' Today; do scontrol update jobid=$J1 StartTime=\"$v\"; echo \"[$v] rc=$?\"; done\nscontrol update jobid=$J1 StartTime=bogus TimeLimit=5; echo rc=$?\nsqueue -h -j $J1 -o '%l'\nscontrol update jobid=$J1; echo rc=$?\nfin"},
    # MailType=, MailUser=, Requeue= (update_job.c: parse_mail_type, parse_uint16, a bad value
    # aborts the request; job_mgr.c _update_job: on running jobs too, Requeue as MIN(n, 1),
    # the mail user the job's user when none or empty).
    {"name": "mail_and_requeue", "cmd": "sb -H -t 60 --wrap true\nfor kv in MailType=END Requeue=0 Requeue=x Requeue=2 Requeue=yes Requeue=-1 MailType=bogus MailType=NONE MailType=end,BEGIN MailUser=bob MailUser= 'MailType=ALL,TIME_LIMIT_80' 'Requeue=0 MailType=fail'; do scontrol update jobid=$J1 $kv; echo \"[$kv] rc=$? $(scontrol show job $J1 | grep -oE 'Requeue=[^ ]*|MailUser=[^ ]*|MailType=[^ ]*' | tr '\\n' ' ')\"; done\nsb -t 5 --wrap 'sleep 600' >/dev/null\nwst $J2 RUNNING\nscontrol update jobid=$J2 MailType=END Requeue=0 MailUser=bob; echo \"running rc=$? $(scontrol show job $J2 | grep -oE 'Requeue=[^ ]*|MailUser=[^ ]*|MailType=[^ ]*' | tr '\\n' ' ')\"\nfin"},
    # TimeMin= and Deadline= (update_job.c: time_str2mins, "Invalid TimeMin value"; parse_time,
    # no change counted when it names none; job_mgr.c _update_job: a minimum above the time
    # limit, or a limit below the minimum, is refused; TimeMin= of a running job and Deadline=
    # of a running job change nothing; a deadline is an operator's, and not in the past).
    {"name": "timemin_deadline", "cmd": "sb -H -t 30 --wrap true\nfor kv in TimeMin=10 TimeMin=40 TimeMin=bogus TimeLimit=5 TimeMin=0 TimeMin=-1 TimeMin=UNLIMITED TimeMin=7 TimeLimit=8 Deadline=now+1hour Deadline=bogus 'TimeMin=3 TimeLimit=2'; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE '(TimeLimit|TimeMin)=[^ ]*|Deadline=(N/A|[0-9]{4})' | tr '\\n' ' ')\"; done\nsb -t 30 --wrap 'sleep 600' >/dev/null\nwst $J2 RUNNING\nscontrol update jobid=$J2 TimeMin=5 2>&1 | m; echo \"running rc=${PIPESTATUS[0]} $(scontrol show job $J2 | grep -oE '(TimeLimit|TimeMin)=[^ ]*|Deadline=(N/A|[0-9]{4})' | tr '\\n' ' ')\"\nfin"},
    {"name": "deadline_by_operator", "user": "root", "cmd": ". /home/alice/x/lib.sh\nsb --uid=alice -H -t 30 --wrap true -D /home/alice/x\nfor kv in Deadline=now+1hour Deadline=now-1hour Deadline=now+3hours Deadline=bogus TimeMin=20; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE '(TimeLimit|TimeMin)=[^ ]*|Deadline=(N/A|[0-9]{4})' | tr '\\n' ' ')\"; done\nsb --uid=alice -t 30 --wrap 'sleep 600' -D /home/alice/x >/dev/null\nwst $J2 RUNNING\nscontrol update jobid=$J2 Deadline=now+1hour 2>&1 | m; echo \"running rc=${PIPESTATUS[0]} $(scontrol show job $J2 | grep -oE 'Deadline=(N/A|[0-9]{4})')\"\nfin"},
    # A key is any case-insensitive prefix of its name at least as long as Slurm's minimum,
    # the first in update_job.c's order winning (TimeM is TimeMin, Ti is none, Na is Name,
    # Job is JobId, P is none, Pa is Partition).
    {"name": "key_prefixes", "cmd": "sb -H -t 30 --wrap true\nfor kv in TimeM=3 TimeL=20 Ti=5 timelimitx=5 Na=short JOBNAME=long Pr=5 Ni=5 Pa=debug P=batch Dep= Acc=research Comm=hello MailT=END MailU=bob Requ=0 StartT=now+1hour BeginTime=now Ex=gpu01; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(squeue -h -j $J1 -o '%l|%j|%P|%y|%a|%k')\"; done\nscontrol update Job=$J1 TimeM=4; echo \"[Job=] rc=$? $(scontrol show job $J1 | grep -oE 'TimeMin=[^ ]*')\"\nfin"},
    # ReqNodeList=/NodeList=/ExcNodeList= (job_mgr.c _update_job: node_name2bitmap, an unknown
    # name ESLURM_INVALID_NODE_NAME; pending jobs only, the excluded list as it is no change; a
    # running job's ReqNodeList asks to shrink it to those of its nodes). scontrol shows the
    # list as written, squeue the nodes; the job then runs on every required node.
    {"name": "node_lists", "cmd": "sb -H -x gpu01,gpu02 --wrap true\nsb -t 5 --wrap 'sleep 300'\nscontrol show job $J1 | grep -oE 'ReqNodeList=[^ ]* ExcNodeList=[^ ]*'\nfor kv in ExcNodeList=gpu03,gpu04 'ExcNodeList=gpu[03-04]' ExcNodeList=gpu09 ReqNodeList=gpu02,gpu01 ExcNodeList= ReqNodeList= ReqNodeList=nosuch NodeList=gpu03 ExcNodeList=gpu04,gpu04 Exc=gpu01 'ExcNodeList=gpu[01-02' ReqNodeList=gpu04 'ReqNodeList=gpu04 ExcNodeList=gpu04'; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE 'ReqNodeList=[^ ]* ExcNodeList=[^ ]*') $(squeue -h -j $J1 -o '%n|%x|%D')\"; done\nwst $J2 RUNNING\nN=$(squeue -h -j $J2 -o %N)\nfor kv in ExcNodeList=gpu04 ReqNodeList=$N ReqNodeList=gpu09 ReqNodeList=; do scontrol update jobid=$J2 $kv 2>&1 | m; echo \"[running ${kv%%=*}] rc=${PIPESTATUS[0]}\"; done\nsb -H -t 5 --wrap 'sleep 300' >/dev/null\nscontrol update jobid=$J3 ReqNodeList=gpu01,gpu02\nscontrol show job $J3 | grep -oE 'NumNodes=[^ ]*'\nscontrol release $J3\nwst $J3 RUNNING\nsqueue -h -j $J3 -o '%D|%N|%C'\nfin"},
    # WorkDir= and MinTmpDiskNode= (update_job.c: parse_uint32, "Invalid MinTmpDiskNode value";
    # job_mgr.c _update_job: pending jobs only, a work directory kept as written, the same one
    # no change), with the output paths that follow the directory.
    {"name": "workdir_tmpdisk", "cmd": "sb -H -t 5 --wrap true\nsb -t 5 --wrap 'sleep 300'\nfor kv in WorkDir=/home/alice WorkDir=/nonexistent WorkDir=rel WorkDir= MinTmpDiskNode=100 MinTmpDiskNode=2G MinTmpDiskNode=x MinTmpDiskNode=-1 MinTmpDiskNode=0 'WorkDir=/tmp MinTmpD=7'; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE '(WorkDir|MinTmpDiskNode|StdOut|StdErr)=[^ ]*' | m | tr '\\n' ' ')$(squeue -h -j $J1 -o '%d|%Z')\"; done\nwst $J2 RUNNING\nfor kv in WorkDir=/home/alice/x WorkDir=/tmp MinTmpDiskNode=5; do scontrol update jobid=$J2 $kv 2>&1 | m; echo \"[running $kv] rc=${PIPESTATUS[0]}\"; done\nfin"},
    # Features= (update_job.c; job_mgr.c _update_job: the same text no change, else pending
    # jobs only; empty clears to (null); a feature no node has ESLURM_INVALID_FEATURE).
    {"name": "features", "user": "root", "cmd": FEAT_ON + ". /home/alice/x/lib.sh\ncd /home/alice/x\nsb --uid=alice -H -t 5 -C ib --wrap true >/dev/null\nsb --uid=alice -t 5 -C fast --wrap 'sleep 300' >/dev/null\nwst $J2 RUNNING\nfor kv in Features=nosuch Features=fast Features=slow,ib Features='(ib|slow)' Features= F=ib; do runuser -u alice -- scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE 'Features=[^ ]*')|$(squeue -h -j $J1 -o %f)\"; done\nfor kv in Features=fast Features=ib; do runuser -u alice -- scontrol update jobid=$J2 $kv 2>&1 | m; echo \"[running $kv] rc=${PIPESTATUS[0]}\"; done\nfin\n" + FEAT_OFF},
    # MinMemoryNode=, MinMemoryCPU=, MinCPUsNode= (update_job.c: parse_uint64/parse_uint16,
    # "Invalid ... value"; job_mgr.c _update_job: pending jobs only, the same memory no change,
    # MinMemoryCPU=0 is MinMemoryNode=0 (the node's memory), MinCPUsNode=0 no change, the
    # CPUs a node N; nothing checked against the nodes until the job is considered).
    {"name": "min_memory_cpus", "cmd": "sb -H -t 5 -n 2 --mem=1000 --wrap true >/dev/null\nsb -t 5 --wrap 'sleep 300' >/dev/null\nsb -H -t 5 --mem-per-cpu=300 --wrap true >/dev/null\nwst $J2 RUNNING\nfor kv in MinMemoryNode=2000 MinMemoryNode=x MinMemoryNode=2G MinMemoryNode=2000 MinMemoryNode=0 MinMemoryCPU=300 MinMemoryCPU=-1 'MinMemoryN=1500 MinCPUsNode=3' MinCPUsNode=4 MinCPUsNode=0 MinC=x; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE '(NumCPUs|MinCPUsNode|MinMemory(Node|CPU)|TRES)=[^ ]*' | tr '\\n' ' ')$(squeue -h -j $J1 -o '%C|%c|%m')\"; done\nfor kv in MinMemoryCPU=300 MinMemoryC=0; do scontrol update jobid=$J3 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J3 | grep -oE 'MinMemory(Node|CPU)=[^ ]*')|$(squeue -h -j $J3 -o '%m')\"; done\nfor kv in MinMemoryNode=500 MinMemoryCPU=100 MinCPUsNode=2 MinCPUsNode=0; do scontrol update jobid=$J2 $kv 2>&1 | m; echo \"[running $kv] rc=${PIPESTATUS[0]}\"; done\nscontrol update jobid=$J1 MinMemoryNode=999999999\nscontrol release $J1\nfor i in $(seq 100); do case $(squeue -h -j $J1 -o %r) in None|Priority|JobHeldUser) sleep 0.2;; *) break;; esac; done\nsqueue -h -j $J1 -o '%T|%r'\nfin"},
    # NumNodes=MIN[-MAX] of pending jobs (update_job.c get_resource_arg_range; job_mgr.c
    # _update_job): a range, a minimum that keeps the maximum, values scontrol refuses itself
    # (exit 0, nothing sent) and ones the controller refuses (MIN > MAX, 0, MIN above the
    # maximum: exit 1, nothing changed); the task count and CPUs rise with the minimum, and a
    # released range takes the free nodes up to its maximum.
    {"name": "numnodes_update", "cmd": "sb -H -N1 --wrap true >/dev/null\nfor v in 2-4 3 abc 4-2 0 2- 5; do scontrol update jobid=$J1 NumNodes=$v 2>&1 | m; echo \"[$v] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE '(NumNodes|NumTasks)=[^ ]*' | tr '\\n' ' ')\"; done\nsb -H -t 5 --wrap 'sleep 300' >/dev/null\nsb -H -t 5 -N2-5 --wrap 'sleep 300' >/dev/null\nscontrol update jobid=$J2 NumNodes=2-3\nscontrol update jobid=$J3 NumNodes=3\nfor j in $J2 $J3; do scontrol show job $j | grep -oE '(NumNodes|NumCPUs|NumTasks)=[^ ]*' | tr '\\n' ' '; echo; done\nscontrol release $J2\nwst $J2 RUNNING\nsqueue -h -j $J2 -o '%T|%D|%C'\nscancel $J2\nwend $J2\nscontrol release $J3\nwst $J3 RUNNING\nsqueue -h -j $J3 -o '%T|%D|%C'\nscontrol show job $J3 | grep -oE '(NumNodes|NumCPUs|NumTasks)=[^ ]*' | tr '\\n' ' '; echo\nfin"},
    # A node range on a running job is refused whole (_update_job: max_nodes of a job not
    # pending is ESLURM_JOB_NOT_PENDING), its node count unchanged.
    {"name": "numnodes_range_running", "cmd": "sb -t 5 -N2 --wrap 'sleep 300' >/dev/null\nwst $J1 RUNNING\nfor v in 1-2 2-3; do scontrol update jobid=$J1 NumNodes=$v 2>&1 | m; echo \"[$v] rc=${PIPESTATUS[0]} $(squeue -h -j $J1 -o '%T|%D')\"; done\nfin"},
    # StdOut= (job_mgr.c _update_job): of a pending job, kept as written (StdErr follows it
    # when the job named none); the job writes there; the same name on a running job changes
    # nothing, another is refused.
    {"name": "stdout_update", "cmd": "rm -f a.out b-*.out\nsb --hold -o a.out -t 5 --wrap 'echo hi'\nscontrol update jobid=$J1 StdOut=b-%j.out 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol show job $J1 | grep -E 'StdErr|StdOut' | m\nscontrol release $J1\nwend $J1\nls a.out b-*.out 2>&1 | m; cat b-*.out\nsb -t 5 -o /dev/null --wrap 'sleep 300'\nwst $J2 RUNNING\nscontrol update jobid=$J2 StdOut=/dev/null 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol update jobid=$J2 StdOut=c.out 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsb --hold -t 5 --wrap true\nscontrol update jobid=$J3 StdOut= 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol show job $J3 | grep -E 'StdErr|StdOut' | m\nrm -f b-*.out\nfin"},
    # A list of jobs (update_job.c _is_job_id, _next_job_id: commas or blanks): each updated
    # in turn, one refused (an unknown id) leaving the others updated; a list with a word is
    # refused whole, named whole.
    {"name": "update_job_list", "cmd": "sb --hold -t 5 --wrap true\nsb --hold -t 5 --wrap true\nscontrol update jobid=$J1,$J2 TimeLimit=3 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%l' | m | sort\nscontrol update jobid=$J1,99999999 TimeLimit=2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%l' | m | sort\nscontrol update jobid=\"$J1 $J2\" TimeLimit=4 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%l' | m | sort\nscontrol update jobid=$J1,x TimeLimit=1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%l' | m | sort\nfin"},
    # NumNodes= needs one job (update_job.c _is_single_job): a list, an unknown job and an
    # array of several records are refused before anything is sent; NumNodes=ALL asks for no
    # change (min_nodes INFINITE, job_mgr.c _update_job) and succeeds.
    {"name": "numnodes_single_job", "cmd": "sb -H -N1 -t 5 --wrap true\nsb -H -t 5 --array=1-2 --wrap true\nfor id in $J1 $J2 ${J2}_1 $J1,$J2 99999999 \"${J2}_[1,2]\"; do scontrol update jobid=$id NumNodes=1 2>&1 | m; echo \"[$id] rc=${PIPESTATUS[0]}\" | m; done\nscontrol update jobid=$J1 NumNodes=ALL 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol show job $J1 | grep -oE '(NumNodes|TimeLimit)=[^ ]*' | tr '\\n' ' '; echo\nscontrol update jobid=$J1 NumNodes=all TimeLimit=3 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nscontrol show job $J1 | grep -oE '(NumNodes|TimeLimit)=[^ ]*' | tr '\\n' ' '; echo\nscontrol update jobid=$J2 NumNodes=1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nfin"},
    # Job ids written as a range in scontrol's job lists (update_job.c _next_job_id: a
    # bracket before any `_` is a hostlist of ids): update and hold take every job of it; a
    # list with a word is refused whole.
    {"name": "job_id_range", "cmd": "sb --hold -t 5 --wrap true\nsb --hold -t 5 --wrap true\nscontrol update jobid=[$J1-$J2] TimeLimit=3 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%l|%r' | m | sort\nscontrol update jobid=\"[$J1,$J2]\" TimeLimit=2 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%l|%r' | m | sort\nscontrol hold [$J1-$J2] 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%l|%r' | m | sort\nscontrol update jobid=\"[$J1-$J2] 1x\" TimeLimit=1 2>&1 | m; echo \"rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1,$J2 -o '%i|%l|%r' | m | sort\nfin"},
    # Added at stop 51.
    upd("endtime_pending", "EndTime=now+1hour", fmt="%i|%l"),
    {"name": "comment_and_name_running", "cmd": "sb -t 5 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol update jobid=$J1 Comment=c1; echo rc=$?\nscontrol update jobid=$J1 Name=newname; echo rc=$?\nsqueue -h -j $J1 -o '%j|%k' | m\nfin"},
    {"name": "endtime_running", "cmd": "sb -t 60 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol update jobid=$J1 EndTime=now+10minutes 2>&1 | m; echo rc=${PIPESTATUS[0]}\nsqueue -h -j $J1 -o '%l' | m\nscontrol update jobid=$J1 EndTime=now+2hours 2>&1 | m; echo rc=${PIPESTATUS[0]}\nsqueue -h -j $J1 -o '%l' | m\nscontrol update jobid=$J1 EndTime=2001-01-01T00:00:00 2>&1 | m; echo rc=${PIPESTATUS[0]}\nfin"},
    # Added at stop 52. NumCPUs=, NumTasks=/ReqProcs=, ReqCores= (update_job.c:
    # get_resource_arg_range, parse_uint32, parse_uint16, "Invalid ... value"; job_mgr.c
    # _update_job: min_cpus, num_tasks and cores_per_socket of a pending job only, a task
    # count below 1 ESLURM_BAD_TASK_COUNT; the CPUs shown follow NumCPUs, not the task count).
    {"name": "cpus_tasks_cores", "cmd": "sb -H -t 5 --wrap true >/dev/null\nfor kv in NumCPUs=4 NumCPUs=0 NumCPUs=x NumCPUs=3-2 NumTasks=3 NumTasks=0 NumTasks=x ReqProcs=2 ReqCores=2 ReqCores=x NumCPUs=1; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE '(NumCPUs|NumTasks|ReqB:S:C:T)=[^ ]*' | tr '\\n' ' ')$(squeue -h -j $J1 -o '%C|%I')\"; done\nsb -t 5 --wrap 'sleep 300' >/dev/null\nwst $J2 RUNNING\nfor kv in NumTasks=2 NumTasks=1 NumCPUs=2 NumCPUs=1 ReqCores=1; do scontrol update jobid=$J2 $kv 2>&1 | m; echo \"[running $kv] rc=${PIPESTATUS[0]} $(squeue -h -j $J2 -o '%C|%D')\"; done\nfin"},
    # The task count an update set is the job's at its start (SLURM_NTASKS), its CPUs those
    # of its tasks.
    {"name": "numtasks_then_start", "cmd": "rm -f nt.out\nsb -H -t 5 -o nt.out --wrap 'echo NT=$SLURM_NTASKS CPN=$SLURM_CPUS_ON_NODE'\nscontrol update jobid=$J1 NumTasks=4; echo rc=$?\nscontrol release $J1\nwend $J1\ncat nt.out\nscontrol show job $J1 | grep -oE '(NumCPUs|NumTasks)=[^ ]*' | tr '\\n' ' '; echo\nrm -f nt.out\nfin"},
    # AdminComment= and SiteFactor= (update_job.c: AdminComment takes `+=` whole and refuses
    # `-=`; SiteFactor strtoll within +/- (NICE_OFFSET - 3); job_mgr.c _update_job: both an
    # operator's, ESLURM_ACCESS_DENIED for a user; job_info.c: `AdminComment=` after WorkDir).
    {"name": "admin_comment_site_factor", "user": "root", "cmd": ". /home/alice/x/lib.sh\nsb --uid=alice -H -t 5 --wrap true -D /home/alice/x\nfor kv in AdminComment=hello SiteFactor=10; do runuser -u alice -- scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[alice $kv] rc=${PIPESTATUS[0]}\"; done\nfor kv in AdminComment=hello 'AdminComment+=more' AdminComment-=x Admin=short SiteFactor=10 SiteFactor=2147483645 SiteFactor=-5 SiteF=x; do scontrol update jobid=$J1 \"$kv\" 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE 'AdminComment=[^ ]*')|$(squeue -h -j $J1 -o %Q)\"; done\nscontrol show job $J1 | grep -A1 WorkDir | m\nfin"},
    # A key written with a sign before `=` (update_job.c: `tag+=`/`tag-=`): TimeLimit takes it
    # as relative, AdminComment `+=`; any other key, once its value is read, "Option ... does
    # not accept [+|-]= syntax"; an unknown key is not supported.
    {"name": "sign_syntax", "cmd": "sb -H -t 30 --wrap true\nfor kv in Comment+=x Name-=y TimeLimit+=5 TimeLimit-=10 TimeLimit+=+5 Foo+=1 NumTasks+=x Partition+=debug; do scontrol update jobid=$J1 \"$kv\" 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(squeue -h -j $J1 -o '%l|%k|%j')\"; done\nfin"},
    # The shape keys (update_job.c: TasksPerNode, ReqSockets, ReqThreads, CPUsPerTask through
    # parse_uint16; job_mgr.c _update_job: of a pending job only) and a few others, on a pending
    # and on a running job.
    {"name": "shape_keys", "cmd": "sb -H -t 5 -n 2 --wrap true >/dev/null\nfor kv in TasksPerNode=2 TasksPerNode=x ReqSockets=1 ReqSockets=x ReqThreads=1 CPUsPerTask=2 CPUsPerTask=x CPUsPerTask=0 OverSubscribe=yes Shared=no OverSubscribe=bogus Contiguous=1 Contiguous=x; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE '(NumCPUs|NumTasks|CPUs/Task|ReqB:S:C:T|Socks/Node|NtasksPerN:B:S:C|OverSubscribe|Contiguous)=[^ ]*' | tr '\\n' ' ')$(squeue -h -j $J1 -o '%C|%c|%z|%h')\"; done\nsb -t 5 --wrap 'sleep 300' >/dev/null\nwst $J2 RUNNING\nfor kv in TasksPerNode=1 CPUsPerTask=1 ReqSockets=1 OverSubscribe=yes Contiguous=0; do scontrol update jobid=$J2 $kv 2>&1 | m; echo \"[running $kv] rc=${PIPESTATUS[0]}\"; done\nfin"},
    {"name": "other_keys", "cmd": "sb -H -t 5 --wrap true >/dev/null\nfor kv in DelayBoot=5 DelayBoot=x Reboot=yes Reboot=no Reboot=x WCKey=w1 Licenses=foo CoreSpec=1 ThreadSpec=1 ReservationName=nosuch ReservationName= UserID=bob UserID=nosuchuser BurstBuffer=x; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(scontrol show job $J1 | grep -oE '(DelayBoot|Reboot|WCKey|Licenses|CoreSpec|Reservation|Prefer|UserId|Features)=[^ ]*' | m | tr '\\n' ' ')\"; done\nfin"},
    # Words without `=` (update_job.c: `Nice` alone is nice 100, another word takes the next
    # as its value, a last one alone is "Invalid input"); Nice= read with strtoll, within
    # +/- (NICE_OFFSET - 3).
    {"name": "words_and_nice", "cmd": "sb -H -t 5 --wrap true >/dev/null\nfor kv in Nice Nice=5x Nice=2147483646 'TimeLimit 7' 'Comment hello' Comment; do scontrol update jobid=$J1 $kv 2>&1 | m; echo \"[$kv] rc=${PIPESTATUS[0]} $(squeue -h -j $J1 -o '%y|%l|%k')\"; done\nfin"},
]

# Area a10: priority and queue order (slurmctld job_mgr.c: set_job_prio, priority/basic;
# squeue sort: sort_job_list).
A10 = [
    {"name": "held_priority_zero", "cmd": "sb --hold --wrap true\nsb --wrap true -w gpu01 -d afterok:$J1\nsqueue -h -j $J1,$J2 -o '%i|%Q|%r' | m | sed -E 's/\\|[1-9][0-9]*\\|/|nonzero|/'\nfin"},
    {"name": "held_sorts_last", "cmd": "sb -H --wrap true\nsb -d afterok:$J1 --wrap true\nsb -d afterok:$J1 --wrap true\nsqueue -h -u alice -o '%i|%r' | m\nfin"},
    {"name": "release_restores", "cmd": "sb -H --wrap true\nsb -H -d afterok:$J1 --wrap true\nscontrol release $J2\nscontrol hold $J2\nsqueue -h -j $J2 -o '%i|%Q|%r' | m\nscontrol release $J2\nsqueue -h -u alice -o '%i|%T' | m\np=$(squeue -h -j $J2 -o %Q); echo \"J2 nonzero: $([ \"$p\" -gt 0 ] && echo yes)\"\nfin"},
    {"name": "consecutive_difference", "cmd": "sb -H --wrap true\nsb -d afterok:$J1 --wrap true\nsb -d afterok:$J1 --wrap true\np2=$(squeue -h -j $J2 -o %Q); p3=$(squeue -h -j $J3 -o %Q); echo $((p2 - p3))\nfin"},
    {"name": "nice_difference", "cmd": "sb -H --wrap true\nsb -d afterok:$J1 --wrap true\nsb -d afterok:$J1 --nice=10 --wrap true\np2=$(squeue -h -j $J2 -o %Q); p3=$(squeue -h -j $J3 -o %Q); echo $((p2 - p3))\nsqueue -h -j $J2,$J3 -o '%i|%y' | m\nfin"},
    {"name": "running_priority_shown", "cmd": "sb --wrap 'sleep 300'\nwst $J1 RUNNING\np=$(squeue -h -j $J1 -o %Q); echo \"running prio nonzero: $([ \"$p\" -gt 0 ] && echo yes)\"\nscontrol show job $J1 | grep -c 'Priority=0 '\nfin"},
    {"name": "admin_hold_priority", "user": "root", "cmd": ". /home/alice/x/lib.sh\nsb --uid=alice -H --wrap true -D /home/alice/x\nsb --uid=alice -d afterok:$J1 --wrap true -D /home/alice/x\nscontrol hold $J2\nsqueue -h -j $J2 -o '%Q|%r' | m\nscontrol release $J2\np=$(squeue -h -j $J2 -o %Q); echo \"J2 nonzero: $([ \"$p\" -gt 0 ] && echo yes)\"\nfin"},
    {"name": "release_order", "cmd": "sb -H --wrap true\nsb -H -d afterok:$J1 --wrap true\nsb -d afterok:$J1 --wrap true\nscontrol release $J2\nsqueue -h -u alice -o '%i|%T' | m\np2=$(squeue -h -j $J2 -o %Q); p3=$(squeue -h -j $J3 -o %Q); echo $((p3 - p2))\nfin"},
    {"name": "exclusive_tres", "cmd": "sb --exclusive -w gpu03 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol show job $J1 | grep -oE '(TRES|NumCPUs|MinMemoryNode|MinMemoryCPU)=[^ ]*' | m\nsqueue -h -j $J1 -o '%C|%m|%b' | m\nfin"},
    {"name": "exclusive_gres_tres", "cmd": "sb --exclusive --gres=gpu:2 -w gpu03 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol show job $J1 | grep -oE '(TRES|NumCPUs)=[^ ]*' | m\nfin"},
    {"name": "hold_then_sort_with_nice", "cmd": "sb -H --wrap true\nsb -d afterok:$J1 --nice=100 --wrap true\nsb -d afterok:$J1 --wrap true\nsqueue -h -u alice -o '%i|%y' | m\nfin"},
    {"name": "top_priority_sorting", "cmd": "sb -H --wrap true\nsb -d afterok:$J1 -p debug --wrap true\nsb -d afterok:$J1 -p batch --wrap true\nsqueue -h -u alice -o '%i|%P' | m\nsqueue -h -u alice -S P,-i -o '%i|%P' | m\nfin"},
    {"name": "requeue_keeps_priority", "cmd": "sb -t 10 --wrap 'sleep 300'\nwst $J1 RUNNING\np1=$(squeue -h -j $J1 -o %Q)\nscontrol requeue $J1\nwst $J1 PENDING\np2=$(squeue -h -j $J1 -o %Q)\nsqueue -h -j $J1 -o '%T' | m\necho \"priority kept: $([ \"$p1\" = \"$p2\" ] && echo yes || echo no)\"\nfin"},
    {"name": "requeue_sacct_in_holdoff", "cmd": "sb -t 10 --wrap 'sleep 300'\nwst $J1 RUNNING\nsa() { for i in $(seq 150); do s=$(sacct -n -X -j $J1 -o State -P); [ -n \"$s\" ] && [ \"$s\" != \"$1\" ] && break; sleep 0.2; done; sleep 3; sacct -n -X -j $J1 -o State -P; }\nscontrol requeue $J1\nsa RUNNING\nsacct -n -D -X -j $J1 -o State -P\nfin"},
    {"name": "requeue_cancel_pending_sacct", "cmd": "sb -t 10 --wrap 'sleep 300'\nwst $J1 RUNNING\nsa() { for i in $(seq 150); do s=$(sacct -n -X -j $J1 -o State -P); [ -n \"$s\" ] && [ \"$s\" != \"$1\" ] && break; sleep 0.2; done; sleep 3; sacct -n -X -j $J1 -o State -P; }\nscontrol requeue $J1\nsa RUNNING >/dev/null\nscancel $J1\nwend $J1\nsqueue -h -t all -j $J1 -o '%T|%r' | m\nsa PENDING\nsacct -n -j $J1 -o JobID,State,ExitCode -P | m\nsacct -n -X -o JobID,State -P | m | grep '^J1|'\nfin"},
    {"name": "requeuehold_sacct", "cmd": "sb -t 10 --wrap 'sleep 300'\nwst $J1 RUNNING\nsa() { for i in $(seq 150); do s=$(sacct -n -X -j $J1 -o State -P); [ -n \"$s\" ] && [ \"$s\" != \"$1\" ] && break; sleep 0.2; done; sleep 3; sacct -n -X -j $J1 -o State -P; }\nscontrol requeuehold $J1\nsa RUNNING\nsacct -n -X -o JobID,State -P | m | grep '^J1|'\nsacct -n -D -X -j $J1 -o State -P\nfin"},
    # An --exclusive job's memory: select/cons_tres job_test.c _job_test (memory per CPU times
    # every CPU of the node, per node as asked, the node's memory for --mem=0).
    {"name": "exclusive_sacct_alloc_tres", "cmd": "sb --exclusive -w gpu03 --wrap true\nwend $J1\nfor i in $(seq 100); do sacct -n -X -j $J1 -o State -P | grep -q COMPLETED && break; sleep 0.2; done\n" "sacct -n -X -j $J1 -o AllocCPUS,AllocTRES%60,ReqTRES%60 | m\nfin"},
    {"name": "exclusive_mem_per_node", "cmd": "sb --exclusive --mem=100G -w gpu03 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol show job -d $J1 | grep -oE '(TRES|MinMemoryNode|MinMemoryCPU|CPU_IDs|Mem)=[^ ]*' | m\nfin"},
    {"name": "exclusive_mem_per_cpu", "cmd": "sb --exclusive --mem-per-cpu=2G -w gpu03 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol show job -d $J1 | grep -oE '(TRES|MinMemoryNode|MinMemoryCPU|CPU_IDs|Mem)=[^ ]*' | m\nfin"},
    {"name": "exclusive_mem_zero", "cmd": "sb --exclusive --mem=0 -w gpu03 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol show job -d $J1 | grep -oE '(TRES|MinMemoryNode|MinMemoryCPU|CPU_IDs|Mem)=[^ ]*' | m\nfin"},
    {"name": "exclusive_ntasks_detail", "cmd": "sb --exclusive -n 2 -w gpu03 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol show job -d $J1 | grep -oE '(NumCPUs|NumTasks|TRES|CPU_IDs|Mem|GRES)=[^ ]*' | m\nfin"},
    {"name": "exclusive_sacct_mem_per_node", "cmd": "sb --exclusive --mem=100G -w gpu03 --wrap true\nwend $J1\nfor i in $(seq 100); do sacct -n -X -j $J1 -o State -P | grep -q COMPLETED && break; sleep 0.2; done\n" "sacct -n -X -j $J1 -o AllocCPUS,AllocTRES%60 | m\nfin"},
    # A submission's reason before the next pass (job_mgr.c job_allocate, _top_priority): a
    # higher-priority pending job shows `Priority` whatever its partition (two jobs without a
    # reservation take the 'same reservation' branch, which compares priorities only); a job
    # that is held, dependent, waiting for its begin time or stopped by a partition limit
    # (job_independent, part_policy_job_runnable_state) does not count, nor one whose nice
    # makes its priority lower. PartitionConfig at submission does not stop a job counting.
    {"name": "submit_priority_other_partition", "cmd": "sb -p debug --wrap true\nsb -p batch --wrap true\nsqueue -h -u alice -o '%i|%P|%r' | m\nfin"},
    {"name": "submit_priority_held_other", "cmd": "sb -H -p debug --wrap true\nsb -p batch --wrap true\nsqueue -h -u alice -o '%i|%P|%r' | m\nfin"},
    {"name": "submit_priority_nice_other", "cmd": "sb --nice=100 -p debug --wrap true\nsb -p batch --wrap true\nsqueue -h -u alice -o '%i|%P|%r' | m\nfin"},
    {"name": "submit_priority_part_config", "cmd": "sb -t 60 -p debug --wrap true\nsb -p batch --wrap true\nsqueue -h -u alice -o '%i|%P|%r' | m\nfin"},
    {"name": "submit_priority_begin_other", "cmd": "sb --begin=now+1hour -p debug --wrap true\nsb -p batch --wrap true\nsqueue -h -u alice -o '%i|%P|%r' | m\nfin"},
    {"name": "submit_priority_dependent_other", "cmd": "sb -H --wrap true\nsb -d afterok:$J1 -p debug --wrap true\nsb -p batch --wrap true\nsqueue -h -u alice -o '%i|%P|%r' | m\nfin"},
    {"name": "submit_priority_same_partition", "cmd": "sb -p debug --wrap true\nsb -p debug --wrap true\nsb -p batch --wrap true\nsqueue -h -u alice -o '%i|%P|%r' | m\nfin"},
    {"name": "submit_priority_other_user", "user": "root", "cmd": ". /home/alice/x/lib.sh\nsb --uid=alice -p debug --wrap true -D /home/alice/x\nsb --uid=bob -p batch --wrap true -D /home/bob/x\nsqueue -h -u alice,bob -o '%i|%u|%P|%r' | m\nfin"},
    # A partition that is down (State=DOWN: submit, not schedule) skips the partition's node
    # count test that makes an up one's too-large job wait (PartitionNodeLimit): the job's
    # test against the partition's nodes fails for good, and the submission is refused.
    {"name": "down_partition_node_count", "user": "root", "cmd": ". /home/alice/x/lib.sh\nscontrol update PartitionName=debug State=DOWN\nsb --uid=alice -p debug -N 3 --wrap true -D /home/alice/x\nsb --uid=alice -p debug -N 2 --wrap true -D /home/alice/x\nsb --uid=alice -p debug -n 200 --wrap true -D /home/alice/x\nsqueue -h -u alice -o '%i|%P|%D|%r' | m\nscontrol update PartitionName=debug State=UP\nsb --uid=alice -p debug -N 3 --wrap true -D /home/alice/x\nsqueue -h -u alice -o '%i|%P|%D' | m\nfin"},
    # Partition states set at run time (update_part.c scontrol_parse_part_options; job_mgr.c
    # _alt_part_test, PARTITION_SUBMIT/PARTITION_SCHED): DRAIN and INACTIVE refuse new jobs
    # before an id, DOWN takes them and starts none, INACTIVE holds them PartitionInactive,
    # DRAIN runs them; sinfo's AVAIL and scontrol's State= follow.
    {"name": "partition_state_update", "user": "root", "cmd": ". /home/alice/x/lib.sh\nfor st in DRAIN INACTIVE DOWN; do scontrol update PartitionName=debug State=$st; echo \"$st rc=$? $(sinfo -h -p debug -o %a) $(scontrol show partition debug | grep -oE 'State=[A-Z]+')\"; sb --uid=alice -p debug -t 1 --wrap 'sleep 60' -D /home/alice/x; done\nfor i in $(seq 100); do [ \"$(squeue -h -j $J1 -o %r)\" = PartitionDown ] && break; sleep 0.1; done\nsqueue -h -j $J1 -o '%P|%T|%r' | m\nscontrol update PartitionName=debug State=INACTIVE\nfor i in $(seq 100); do [ \"$(squeue -h -j $J1 -o %r)\" = PartitionInactive ] && break; sleep 0.1; done\nsqueue -h -j $J1 -o '%P|%T|%r' | m\nscontrol update PartitionName=debug State=DRAIN\nwst $J1 RUNNING\nsqueue -h -j $J1 -o '%P|%T' | m\nscontrol update PartitionName=debug State=UP\nsinfo -h -p debug -o %a\nfin"},
    {"name": "partition_update_errors", "user": "root", "cmd": "for a in 'PartitionName=debug Foo=1' 'PartitionName=debug' 'PartitionName=debug State=' 'PartitionName=debug State=BOGUS' 'PartitionName=debug junk' 'PartitionName=nosuch State=UP' 'State=dr PartitionName=debug' 'Part=debug st=i' 'PartitionName=debug sta=u'; do scontrol update $a; echo \"[$a] rc=$? $(scontrol show partition debug | grep -oE 'State=[A-Z]+')\"; done\nscontrol update PartitionName=debug State=UP"},
    {"name": "partition_update_not_admin", "cmd": "scontrol update PartitionName=debug State=DOWN; echo rc=$?\nscontrol show partition debug | grep -oE 'State=[A-Z]+'"},    # Updates of a job in an INACTIVE partition (job_mgr.c _update_job ends with
    # job_limits_check): kept, and answered "Requested partition configuration not available
    # now"; a release shows PartitionInactive at once.
    {"name": "partition_inactive_job_update", "user": "root", "cmd": ". /home/alice/x/lib.sh\nsb --uid=alice -p debug -H -t 1 --wrap 'sleep 60' -D /home/alice/x\nscontrol update PartitionName=debug State=INACTIVE\nscontrol release $J1 2>&1 | m; echo \"release rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1 -o '%T|%r' | m\nscontrol update JobId=$J1 Comment=kept 2>&1 | m; echo \"update rc=${PIPESTATUS[0]}\"\nscontrol show job $J1 | grep -oE 'Comment=[^ ]*|Reason=[^ ]*' | m\nscontrol hold $J1 2>&1 | m; echo \"hold rc=${PIPESTATUS[0]}\"\nsqueue -h -j $J1 -o '%T|%r' | m\nscontrol update PartitionName=debug State=UP\nscontrol release $J1 2>&1 | m; echo \"release rc=${PIPESTATUS[0]}\"\nfin"},
    # scontrol update PartitionName= MaxTime= DefaultTime= (update_part.c, partition_mgr.c
    # update_part): bad values refused with "Invalid input", a DefaultTime above MaxTime
    # ignored; a lower MaxTime holds a pending job PartitionTimeLimit, a higher one lets it
    # run; a new DefaultTime is the limit of the jobs submitted after it.
    {"name": "partition_update_times", "user": "root", "cmd": ". /home/alice/x/lib.sh\nshow() { scontrol show partition $1 | grep -oE '(MaxTime|DefaultTime)=[^ ]+' | tr '\\n' ' '; }\nfor a in 'MaxTime=abc' 'MaxTime=-5' 'DefaultTime=xyz' 'MaxT=10'; do scontrol update PartitionName=debug $a; echo \"[$a] rc=$? $(show debug)\"; done\nsinfo -h -p debug -o '%l'\nsb --uid=alice -p debug -t 20 --wrap 'sleep 60' -D /home/alice/x\nfor i in $(seq 100); do [ \"$(squeue -h -j $J1 -o %r)\" = PartitionTimeLimit ] && break; sleep 0.1; done\nsqueue -h -j $J1 -o '%T|%r|%l' | m\nscontrol update PartitionName=debug MaxTime=UNLIMITED; echo \"unlimited rc=$? $(show debug) $(sinfo -h -p debug -o %l)\"\nwst $J1 RUNNING\nsqueue -h -j $J1 -o '%T|%l' | m\nscontrol update PartitionName=debug MaxTime=30 DefaultTime=40; echo \"above rc=$? $(show debug)\"\nscontrol update PartitionName=batch DefaultTime=5; echo \"batch rc=$? $(show batch)\"\nsb --uid=alice --hold --wrap true -D /home/alice/x\nscontrol show job $J2 | grep -oE 'TimeLimit=[^ ]+'\nscontrol update PartitionName=batch DefaultTime=1:00:00; echo \"batch rc=$? $(show batch)\"\nfin"},
]

# Area a11: accounts in output (slurmctld job_mgr.c: _get_job_parts / job_create with
# assoc_mgr_fill_in_assoc: the user's default account).
A11 = [
    {"name": "squeue_default_account", "cmd": "sb --hold --wrap true\nsqueue -h -j $J1 -o '%a' | m\nfin"},
    {"name": "scontrol_default_account", "cmd": "sb --hold --wrap true\nscontrol show job $J1 | grep -oE 'Account=[^ ]*'\nfin"},
    {"name": "explicit_account", "cmd": "sb --hold -A research --wrap true\nsqueue -h -j $J1 -o '%a' | m\nfin"},
    {"name": "unknown_account", "cmd": "sb --hold -A nosuch --wrap true || exit 0\nsqueue -h -j $J1 -o '%a' | m\nfin"},
    {"name": "bob_default_account", "user": "bob", "cmd": "sb --hold --wrap true\nsqueue -h -j $J1 -o '%a|%u' | m\nfin"},
    {"name": "squeue_O_account", "cmd": "sb --hold --wrap true\nsqueue -h -j $J1 -O account,username | m\nfin"},
    {"name": "env_account", "cmd": "sb --wrap 'echo ACCT=$SLURM_JOB_ACCOUNT' -o acct.out\nwend $J1\ncat acct.out\nrm -f acct.out\nfin"},
    {"name": "sacct_account", "cmd": "sb --wrap true\nwend $J1\nfor i in $(seq 100); do sacct -n -X -j $J1 -o State -P | grep -q COMPLETED && break; sleep 0.2; done\nsacct -n -X -j $J1 -o Account,State -P | m\nfin"},
    {"name": "account_case", "cmd": "sb --hold -A RESEARCH --wrap true\nsqueue -h -j $J1 -o '%a' | m\nfin"},
    {"name": "account_env_var", "cmd": "SBATCH_ACCOUNT=research sb --hold --wrap true\nsqueue -h -j $J1 -o '%a' | m\nfin"},
    # Added at stop 51.
    {"name": "script_account_directive", "cmd": "printf '#!/bin/bash\\n#SBATCH -A research\\ntrue\\n' > t.sh\nsb --hold t.sh\nsqueue -h -j $J1 -o '%a' | m\nfin"},
    {"name": "squeue_filter_account", "cmd": "sb --hold --wrap true\nsb --hold -A research --wrap true\nsqueue -h -A research -u alice -o '%i|%a' | m\nfin"},
    {"name": "update_account", "cmd": "sb --hold --wrap true\nscontrol update jobid=$J1 Account=research; echo rc=$?\nsqueue -h -j $J1 -o '%a' | m\nscontrol update jobid=$J1 Account=nosuch; echo rc=$?\nsqueue -h -j $J1 -o '%a' | m\nfin"},
    {"name": "other_users_account", "user": "bob", "cmd": "sb --hold -A research --wrap true\nsqueue -h -j ${J[-1]} -o '%a|%u' 2>&1 | m\nfin"},
    {"name": "empty_account", "cmd": "sb --hold -A '' --wrap true\nsqueue -h -j ${J[-1]} -o '%a' 2>&1 | m\nfin"},
]

# Area a07: node states (src/common/slurm_protocol_defs.c: node_state_string,
# node_state_string_compact; sinfo).
# wnode: waits (120 s at most) until gpu04 responds (Slurm marks a node it resumed from DOWN
# or FAIL not responding until its next ping).
WNODE = "for i in $(seq 1200); do sinfo -h -N -n gpu04 -o %t | grep -q '[*]' || break; sleep 0.1; done\n"

# Slurm 22.05's sinfo naming one node (`-n gpu04`, sinfo opts.c node_name_single) asks for that
# node alone (REQUEST_NODE_INFO_SINGLE), which slurmctld answers without refreshing its select
# plugin's per-node allocation (proc_req.c `_slurm_rpc_dump_node_single` leaves
# `select_g_select_nodeinfo_set_all` out): the CPUs allocated, and sinfo's MIXED (sinfo.c
# `_query_server`), are those of the last full node query (0711). The cases that print them
# list every node and keep gpu04's line (ALL04).
ALL04 = "sinfo -h -N -o '%s' | grep '^gpu04|'\n"


def fail_job(name, opts):
    """A running job on gpu04, then FAIL: the job runs on, sinfo/scontrol show the node;
    after the job ends the node is FAIL on IDLE."""
    return {"name": name, "user": "root",
            "cmd": WNODE + "j=$(sbatch --parsable --uid=alice -w gpu04 -t 5 " + opts + " --wrap 'sleep 300' -D /home/alice/x)\nfor i in $(seq 300); do [ \"$(squeue -h -j $j -o %T)\" = RUNNING ] && break; sleep 0.1; done\nscontrol update nodename=gpu04 state=fail reason=bad\n" + ALL04 % "%N|%t|%T|%C|%F" + "scontrol show node gpu04 | grep -oE '(State|Reason)=[^ ]*'\nsqueue -h -j $j -o '%T'\nscancel $j\nfor i in $(seq 300); do [ -z \"$(squeue -h -j $j -t R,CG -o %T)\" ] && break; sleep 0.1; done\n" + ALL04 % "%N|%t|%T|%C" + "scontrol show node gpu04 | grep -oE 'State=[^ ]*'\nscontrol update nodename=gpu04 state=resume\n" + WNODE + "sinfo -h -N -n gpu04 -o '%t'"}


def ns(name, update, fmt="%N|%t|%T", opts="-N -n gpu04"):
    o = ("-o '%s'" % fmt) if fmt else ""
    return {"name": name, "user": "root",
            "cmd": WNODE + "scontrol update nodename=gpu04 %s\nsinfo %s %s\nscontrol show node gpu04 | grep -oE '(State|Reason)=[^ ]*'\nscontrol update nodename=gpu04 state=resume 2>/dev/null\n" % (update, opts, o) + WNODE + "sinfo -h -N -n gpu04 -o '%t'"}

A07 = [
    ns("drain_idle", "state=drain reason=maint"),
    ns("down", "state=down reason=broken"),
    ns("fail", "state=fail reason=bad"),
    ns("drain_long", "state=drain reason=m", opts="-N -l -n gpu04", fmt=""),
    ns("sinfo_per_partition", "state=drain reason=m", opts="-N -n gpu01,gpu04", fmt="%N|%P|%t"),
    ns("sinfo_summary_states", "state=drain reason=m", opts="", fmt="%P|%a|%D|%t"),
    ns("node_filter_absent", "state=drain reason=m", opts="-N -n gpu09", fmt="%N|%t"),
    ns("no_reason_drain", "state=drain"),
    ns("resume_already_idle", "state=resume"),
    {"name": "draining_with_job", "user": "root",
     "cmd": WNODE + "j=$(sbatch --parsable --uid=alice -w gpu04 -t 5 --wrap 'sleep 300' -D /home/alice/x)\nfor i in $(seq 300); do [ \"$(squeue -h -j $j -o %T)\" = RUNNING ] && break; sleep 0.1; done\nscontrol update nodename=gpu04 state=drain reason=m\nsinfo -h -N -n gpu04 -o '%N|%t|%T'\nscancel $j\nfor i in $(seq 300); do [ -z \"$(squeue -h -j $j -t R,CG -o %T)\" ] && break; sleep 0.1; done\nsinfo -h -N -n gpu04 -o '%N|%t|%T'\nscontrol update nodename=gpu04 state=resume"},
    {"name": "mixed_state", "user": "root",
     "cmd": WNODE + "j=$(sbatch --parsable --uid=alice -w gpu04 -t 5 -n 2 --wrap 'sleep 300' -D /home/alice/x)\nfor i in $(seq 300); do [ \"$(squeue -h -j $j -o %T)\" = RUNNING ] && break; sleep 0.1; done\nsinfo -h -N -n gpu04 -o '%N|%t|%T|%C'\nscancel $j\nfor i in $(seq 300); do [ -z \"$(squeue -h -j $j -t R,CG -o %T)\" ] && break; sleep 0.1; done"},
    # The reason's user and time (node_mgr.c: reason_uid, reason_time; sinfo %u %H -R; scontrol).
    {"name": "reason_user_time", "user": "root",
     "cmd": WNODE + "sinfo -h -N -n gpu04 -o '%N|%E|%u|%H'\nscontrol update nodename=gpu04 state=drain reason='maint test'\nsinfo -h -N -n gpu04 -o '%N|%E|%u|%H'\nsinfo -R -h -n gpu04\nscontrol show node gpu04 | grep -E '^ *Reason='\nscontrol update nodename=gpu04 state=resume\n" + WNODE + "sinfo -h -N -n gpu04 -o '%N|%E|%u|%H'"},
    # The FAIL flag (node_mgr.c update_node; node_state_string/_compact: FAILING/FAILG only
    # on an ALLOCATED node, DRAIN before FAIL; sinfo.c _update_sinfo counts FAIL as idle).
    ns("fail_long", "state=fail reason=bad", opts="-N -l -n gpu04", fmt=""),
    fail_job("fail_mixed_job", "-n 2"),
    fail_job("fail_exclusive_job", "--exclusive"),
    {"name": "fail_pending_job", "user": "root",
     "cmd": WNODE + "scontrol update nodename=gpu04 state=fail reason=bad\nj=$(sbatch --parsable --uid=alice -w gpu04 -t 5 --wrap 'sleep 300' -D /home/alice/x)\nfor i in $(seq 100); do [ \"$(squeue -h -j $j -o %r)\" != None ] && break; sleep 0.1; done\nsqueue -h -j $j -o '%T|%r'\nscancel $j\nscontrol update nodename=gpu04 state=resume\n" + WNODE + "sinfo -h -N -n gpu04 -o '%t'"},
    ns("fail_then_drain", "state=fail reason=bad\nscontrol update nodename=gpu04 state=drain reason=maint"),
    ns("drain_then_fail", "state=drain reason=maint\nscontrol update nodename=gpu04 state=fail reason=bad"),
    ns("fail_summary", "state=fail reason=bad", opts="", fmt="%P|%D|%t|%F|%C"),
    ns("fail_filter_reason", "state=fail reason=bad", opts="-N -t fail", fmt="%N|%E|%u|%t"),
    ns("fail_no_reason", "state=fail"),
    {"name": "fail_resume_clears", "user": "root",
     "cmd": WNODE + "scontrol update nodename=gpu04 state=fail reason=bad\nscontrol update nodename=gpu04 state=resume\n" + WNODE + "sinfo -h -N -n gpu04 -o '%N|%t|%E'\nscontrol show node gpu04 | grep -oE '(State|Reason)=[^ ]*'"},
    # 0711 with a full node query: the allocation as it is (MIXED, 2 CPUs).
    {"name": "mixed_state_full_query", "user": "root",
     "cmd": WNODE + "j=$(sbatch --parsable --uid=alice -w gpu04 -t 5 -n 2 --wrap 'sleep 300' -D /home/alice/x)\nfor i in $(seq 300); do [ \"$(squeue -h -j $j -o %T)\" = RUNNING ] && break; sleep 0.1; done\n" + ALL04 % "%N|%t|%T|%C" + "scancel $j\nfor i in $(seq 300); do [ -z \"$(squeue -h -j $j -t R,CG -o %T)\" ] && break; sleep 0.1; done"},
    # AvailableFeatures=/ActiveFeatures= (update_node.c key prefixes; node_mgr.c update_node,
    # _valid_features_act: the active ones a subset of the available ones, both the same
    # when only the available ones are given), as scontrol show node and sinfo %f %b show them.
    {"name": "node_features_update", "user": "root", "cmd": "for kv in 'AvailableFeatures=a,b' 'ActiveFeatures=a' 'ActiveFeatures=c' 'AvailableFeatures=b' 'Avail=b,c ActiveFeatures=c' 'F=x' 'Act=' 'Features='; do scontrol update NodeName=gpu04 $kv; echo \"[$kv] rc=$? $(scontrol show node gpu04 | grep -oE '(Available|Active)Features=[^ ]*' | tr '\\n' ' ')$(sinfo -h -N -n gpu04 -o '%f|%b')\"; done\nscontrol update NodeName=gpu[03-04] AvailableFeatures=z\nsinfo -h -o '%N|%f|%b' | sort\nscontrol update NodeName=gpu[03-04] ActiveFeatures= \nscontrol update NodeName=gpu[03-04] AvailableFeatures="},
    # Added at stop 51.
    {"name": "sinfo_state_filter", "user": "root", "cmd": WNODE + "scontrol update nodename=gpu04 state=drain reason=maint\nsinfo -h -t drain -o '%N|%T'\nsinfo -h -t idle -N -o '%N|%T' | sort -u\nsinfo -h -t drained,down -N -o '%N|%T'\nsinfo -h -t bogus -o '%N' 2>&1; echo rc=$?\nscontrol update nodename=gpu04 state=resume\n" + WNODE + "sinfo -h -N -n gpu04 -o '%t'"},
    {"name": "sinfo_R_format", "user": "root", "cmd": WNODE + "scontrol update nodename=gpu04 state=drain reason='disk bad'\nsinfo -R -h -o '%E|%N|%T|%t'\nscontrol update nodename=gpu04 state=resume\n" + WNODE + "sinfo -h -N -n gpu04 -o '%t'"},
    ns("down_reason_required", "state=down"),
    ns("bad_state_word", "state=sideways"),
]

# Area a04: GRES and TRES strings (src/common/gres.c, slurmctld: TresPerJob/TresPerNode;
# squeue -O tres-per-*).
DETAIL = "scontrol show job -d $%s | grep -oE '(Nodes=[^ ]* CPU_IDs=[^ ]* Mem=[^ ]* GRES=[^ ]*|JOB_GRES=[^ ]*)' | m\n"


def cpu_ids(name, opts, pre=None, pre2=None, node="gpu03", cancel_first=False):
    """Jobs on `node` (the earlier ones first, running), then the last one's CPU_IDs/GRES."""
    cmd, n = "", 0
    for o in (pre, pre2, opts):
        if o is None:
            continue
        n += 1
        cmd += "sb -w %s %s --wrap 'sleep 300'\nwst $J%d RUNNING\n" % (node, o, n)
        if cancel_first and n == 2:
            cmd += "scancel $J1\nwend $J1\n"
    return {"name": name, "cmd": cmd + DETAIL % ("J%d" % n) + "fin"}

def tres(name, opts):
    return {"name": name, "cmd": "sb --hold %s --wrap true || exit 0\nsqueue -h -j $J1 -O tres-per-job:30,tres-per-node:30,tres-per-task:30,tres-per-socket:20 2>&1 | m\nscontrol show job $J1 | grep -oE '(TresPer[A-Za-z]*|NumNodes|NumTasks|TRES)=[^ ]*' | m\nfin" % opts}

A04 = [
    tres("gres_untyped", "--gres=gpu:2"),
    tres("gres_typed", "--gres=gpu:h100:3"),
    tres("gpus", "--gpus=5"),
    tres("gpus_typed", "--gpus=h100:2"),
    tres("gpus_per_node", "-N 2 --gpus-per-node=2"),
    tres("gpus_per_task", "-n 3 --gpus-per-task=1"),
    tres("gpus_and_gres", "--gpus=2 --gres=gpu:1"),
    tres("gres_plain_gpu", "--gres=gpu"),
    tres("gpus_per_socket", "--gpus-per-socket=1 --sockets-per-node=2"),
    tres("gres_count_zero", "--gres=gpu:0"),
    tres("bad_gres", "--gres=tpu:1"),
    {"name": "gpu_indices_partly_used", "cmd": "sb -w gpu03 --gres=gpu:3 --wrap 'sleep 300'\nwst $J1 RUNNING\nsb -w gpu03 --gres=gpu:2 --wrap 'sleep 300'\nwst $J2 RUNNING\nscontrol show job -d $J2 | grep -oE '(Nodes=[^ ]* CPU_IDs=[^ ]* Mem=[^ ]* GRES=[^ ]*|JOB_GRES=[^ ]*)' | m\nfin"},
    {"name": "cpu_ids_gpus_per_task", "cmd": "sb -w gpu03 -n 3 --gpus-per-task=1 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol show job -d $J1 | grep -oE '(Nodes=[^ ]* CPU_IDs=[^ ]* Mem=[^ ]* GRES=[^ ]*|JOB_GRES=[^ ]*)' | m\nfin"},
    {"name": "cuda_visible_unset_without_gpus", "cmd": "sb -o g.out --wrap 'echo \"CVD=${CUDA_VISIBLE_DEVICES-unset} JG=${SLURM_JOB_GPUS-unset}\"'\nwend $J1\ncat g.out; rm -f g.out\nfin"},
    # gres.c _test_gres_cnt: how the GPU options must fit together and what they fix.
    tres("gpus_not_multiple_of_gres", "--gpus=3 --gres=gpu:2"),
    tres("gpus_per_socket_without_sockets", "--gpus-per-socket=1"),
    tres("gpus_per_task_without_ntasks", "--gpus-per-task=1"),
    tres("gpus_per_task_fixed_nodes", "-N 2 --gpus-per-task=1"),
    tres("gpus_over_gpus_per_task", "--gpus=4 --gpus-per-task=2"),
    tres("gpus_below_nodes", "-N 3 --gpus=2"),
    tres("gres_none", "--gres=none"),
    tres("gpus_per_node_over_nodes_range", "-N 1-3 --gpus=4 --gpus-per-node=2"),
    # TRES of a running job (typed request; AccountingStorageTRES=gres/gpu) and in sacct.
    {"name": "alloc_tres_running_typed", "cmd": "sb -w gpu02 --gres=gpu:h100:2 --wrap 'sleep 300'\nwst $J1 RUNNING\nscontrol show job $J1 | grep -oE '(TRES|TresPerNode)=[^ ]*' | m\nsqueue -h -j $J1 -O tres-alloc:60,tres-per-node:30 | m\nfin"},
    {"name": "sacct_alloc_tres", "cmd": "sb -w gpu02 --gres=gpu:2 --wrap true\nwend $J1\nsacct -n -X -j $J1 -o AllocTRES%60,ReqTRES%60 | m\nfin"},
    # CPU_IDs as cons_tres picks cores (dist_tasks.c _cyclic_sync_core_bitmap: tasks of one
    # CPU round-robin over the sockets, several CPUs per task packed per socket first) and
    # GPU indices as gres_select_filter.c picks them (lowest free index without Links=).
    cpu_ids("cpu_ids_ntasks4", "-n 4"),
    cpu_ids("cpu_ids_cpus_per_task4", "-c 4"),
    cpu_ids("cpu_ids_ntasks2_cpt24", "-n 2 -c 24"),
    cpu_ids("cpu_ids_cpt40", "-c 40"),
    cpu_ids("cpu_ids_second_job", "-n 2", pre="-n 3"),
    cpu_ids("cpu_ids_after_packed_job", "-n 4", pre="-c 30"),
    cpu_ids("cpu_ids_two_nodes", "-N 2 -n 4", node="gpu[03-04]"),
    cpu_ids("gpu_indices_after_release", "--gres=gpu:4", pre="--gres=gpu:3", pre2="--gres=gpu:2", cancel_first=True),
    {"name": "gpus_per_socket_running", "cmd": "sb -w gpu03 --gpus-per-socket=1 --sockets-per-node=2 -o s.out --wrap 'env | grep -E \"^SLURM_(GPUS_PER_SOCKET|SOCKETS_PER_NODE|JOB_GPUS|GPUS|CPUS_ON_NODE)=\" | sort; sleep 300'\nwst $J1 RUNNING\nfor i in $(seq 100); do [ -s s.out ] && break; sleep 0.1; done\nsleep 0.5\ncat s.out; rm -f s.out\n" + DETAIL % "J1" + "scontrol show job -d $J1 | grep -oE '(Socks/Node|NumCPUs|TRES|TresPerSocket)=[^ ]*' | m\nfin"},
    # `-n` alone over more CPUs than a node has: spread over nodes (cons_tres), as many as
    # the tasks need; above the partition's node count it waits (PartitionConfig).
    {"name": "ntasks_spread_over_nodes", "cmd": "sb -p batch -n 100 --wrap 'sleep 300'\nwst $J1 RUNNING\nsqueue -h -j $J1 -o '%C|%D|%T' | m\nscontrol show job $J1 | grep -oE '(NumNodes|NumCPUs|NumTasks|CPUs/Task)=[^ ]*' | m\nsb -H -p batch -n 3 -c 40 --wrap true\nsqueue -h -j $J2 -o '%C|%D|%r' | m\nscontrol show job $J2 | grep -oE '(NumNodes|NumCPUs|NumTasks|CPUs/Task)=[^ ]*' | m\nsb -p debug -n 200 --wrap true\nsqueue -h -j $J3 -o '%C|%D|%r' | m\nfin"},
    # srun's counts given together (libsrun/opt.c _opt_verify): fewer tasks than nodes (-N,
    # -w or the allocation's) lower the nodes with a warning, printed even with -Q.
    {"name": "srun_fewer_tasks_than_nodes", "cmd": "rm -f o1\nsb -p batch -N 3 -o o1 --wrap 'srun -n 2 printenv SLURMD_NODENAME | sort; srun -n 1 -w gpu01,gpu02 printenv SLURMD_NODENAME; srun -Q -n 2 true; srun -n 2 --ntasks-per-node=3 true; srun -N 3 -n 2 true'\nwend $J1\ncat o1 | m\nfin"},
    # --ntasks-per-node with -n and no -N: ceil(n / per node) nodes of that many tasks each,
    # the task count then that many a node (node_scheduler.c build_node_details); the batch
    # script keeps -n, and srun drops the option that no longer matches (libsrun/opt.c);
    # more tasks than the nodes asked for hold is refused; a range takes its maximum.
    {"name": "ntasks_per_node_sets_nodes", "cmd": "rm -f o1\nsb -p batch -n 10 --ntasks-per-node=4 -o o1 --wrap 'echo $SLURM_NTASKS $SLURM_NNODES $SLURM_TASKS_PER_NODE $SLURM_JOB_CPUS_PER_NODE; srun printenv SLURMD_NODENAME | sort | uniq -c; sleep 300'\nwst $J1 RUNNING\nsqueue -h -j $J1 -o '%C|%D|%T' | m\nscontrol show job $J1 | grep -oE '(NumNodes|NumCPUs|NumTasks)=[^ ]*' | m\nfor i in $(seq 100); do [ \"$(cat o1 2>/dev/null | wc -l)\" -ge 5 ] && break; sleep 0.1; done\ncat o1 | m\nsb -p batch -n 3 --ntasks-per-node=4 --wrap 'sleep 300'\nwst $J2 RUNNING\nscontrol show job $J2 | grep -oE '(NumNodes|NumCPUs|NumTasks)=[^ ]*' | m\nsb -p batch -N 2 -n 10 --ntasks-per-node=4 --wrap true\nsb -p batch -N 2-4 -n 4 --ntasks-per-node=2 --wrap 'sleep 300'\nwst $J3 RUNNING\nsqueue -h -j $J3 -o '%C|%D|%T' | m\nscontrol show job $J3 | grep -oE '(NumNodes|NumCPUs|NumTasks)=[^ ]*' | m\nfin"},
]

# Area a08: configuration files as Slurm's commands read them (src/common/parse_config.c,
# read_config.c).
def conf(name, body, cmd="scontrol show hostnames 'n[1-3]'"):
    return {"name": name, "user": "root",
            "cmd": "d=$(mktemp -d)\ncat > $d/slurm.conf <<'EOF'\n%sEOF\nSLURM_CONF=$d/slurm.conf %s 2>&1 | sed \"s|$d|DIR|g\"; echo \"rc=${PIPESTATUS[0]}\"\nrm -rf $d" % (body, cmd)}

BASE = ("ClusterName=oracle\nSlurmctldHost=vm(127.0.0.1)\nSlurmctldPort=6817\nAuthType=auth/munge\n"
        "CredType=cred/munge\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\nGresTypes=gpu\n")
NODE = "NodeName=gpu0[1-4] NodeAddr=127.0.0.1 Sockets=2 CoresPerSocket=32 RealMemory=512000 Gres=gpu:h100:8\n"
PART = "PartitionName=batch Nodes=gpu0[1-4] Default=YES\n"

A08 = [
    conf("unknown_key", BASE + "FooBarKey=1\n" + NODE + PART),
    conf("key_case", BASE.replace("ClusterName", "clustername") + NODE + PART),
    conf("spaces_around_equals", BASE + "MaxJobCount = 100\n" + NODE + PART),
    conf("line_continuation", BASE + "NodeName=gpu0[1-4] NodeAddr=127.0.0.1 \\\n  Sockets=2 CoresPerSocket=32 RealMemory=512000 Gres=gpu:h100:8\n" + PART),
    conf("comment_hash_in_value", BASE + "# comment\nMaxJobCount=100 # trailing\n" + NODE + PART),
    conf("include_missing", BASE + "Include /nonexistent/extra.conf\n" + NODE + PART),
    conf("bad_value_type", BASE + "MaxJobCount=lots\n" + NODE + PART),
    conf("nodename_default_only", BASE + "NodeName=DEFAULT Sockets=2 CoresPerSocket=32\nNodeName=gpu0[1-4] RealMemory=512000 Gres=gpu:h100:8\n" + PART),
    conf("duplicate_key", BASE + "MaxJobCount=100\nMaxJobCount=200\n" + NODE + PART),
    conf("missing_file", "", cmd="SLURM_CONF=/nonexistent/slurm.conf scontrol show hostnames 'n[1-2]'"),
    conf("empty_value", BASE + "MaxJobCount=\n" + NODE + PART),
    conf("hostnames_from_env", BASE + NODE + PART, cmd="SLURM_NODELIST='a[1-2],b3' scontrol show hostnames"),
    # Added at stop 51.
    conf("key_without_value", BASE + "MaxJobCount\n" + NODE + PART),
    conf("tab_separated_pairs", BASE + "MaxJobCount=100\tMinJobAge=10\n" + NODE + PART),
    conf("bad_bool", BASE + NODE + "PartitionName=batch Nodes=gpu0[1-4] Default=MAYBE\n"),
    conf("hostnames_reversed_range", BASE + NODE + PART, cmd="scontrol show hostnames 'n[3-1]'"),
    conf("hostlist_compress", BASE + NODE + PART, cmd="scontrol show hostlist n1,n2,n3,m5,n10"),
    conf("hostnames_padded", BASE + NODE + PART, cmd="scontrol show hostnames 'n[08-11]'"),
    conf("nodename_default_later", BASE + NODE + "NodeName=DEFAULT Sockets=4\n" + PART),
    conf("unterminated_bracket", BASE + NODE + PART, cmd="scontrol show hostnames 'n[1-3'"),
    conf("two_keys_one_line", BASE + "MaxJobCount=100 MinJobAge=10\n" + NODE + PART),
    conf("unknown_key_on_node_line", BASE + "NodeName=gpu0[1-4] NodeAddr=127.0.0.1 Bogus=1 Sockets=2\n" + PART),
    conf("bad_number_on_node_line", BASE + "NodeName=gpu0[1-4] Sockets=two RealMemory=5\n" + PART),
    conf("stray_word_on_node_line", BASE + "NodeName=gpu0[1-4] Sockets=2  stray \n" + PART),
]

# Area a12: job ids as Slurm tools parse them (src/common/slurm_protocol_defs.c /
# slurm_xlate_job_id; squeue/scontrol/scancel id parsing).
def jid(name, cmd):
    return {"name": name, "cmd": cmd + " 2>&1; echo \"rc=$?\""}

A12 = [
    jid("squeue_max_u32", "squeue -h -j 4294967295"),
    jid("scontrol_max_u32", "scontrol show job 4294967295"),
    jid("scancel_max_u32", "scancel 4294967295"),
    jid("scontrol_negative", "scontrol show job -5"),
    jid("squeue_too_large", "squeue -j 4294967296"),
    jid("squeue_letters", "squeue -j abc"),
    jid("scancel_too_large", "scancel 4294967296"),
    jid("scancel_unknown", "scancel 99999999"),
    jid("scontrol_unknown", "scontrol show job 99999999"),
    jid("scancel_array_bad", "scancel 123_abc"),
    # Added at stop 51.
    {"name": "squeue_array_bad_bracket", "cmd": "sb --hold --array=1-3 --wrap true\nsqueue -h -j \"${J1}_[1-\" -o '%i|%T' | m; echo rc=${PIPESTATUS[0]}\nsqueue -h -j \"${J1}_[2-3]\" -o '%i|%T' | m\nsqueue -h -j \"${J1}_2x\" -o '%i|%T' | m\nfin"},
    jid("scancel_step_bad", "scancel 12.abc"),
    jid("squeue_zero", "squeue -h -j 0"),
    jid("scontrol_hold_unknown", "scontrol hold 99999999"),
    jid("sacct_bad_id", "sacct -n -j abc"),
    jid("scontrol_plus_sign", "scontrol show job +99999999"),
    jid("squeue_lone_comma", "squeue -h -j ,"),
    jid("scancel_zero", "scancel 0"),
]

AREAS = [
    ("a01", A01), ("a02", A02), ("a03", A03), ("a04", A04), ("a05", A05), ("a06", A06),
    ("a07", A07), ("a08", A08), ("a09", A09), ("a10", A10), ("a11", A11), ("a12", A12),
]
