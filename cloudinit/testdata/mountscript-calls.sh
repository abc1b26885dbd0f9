mount_disk 'vs-data' '/data' 'alice'
mount_disk 'a.b+c-d_e' '/srv/projects' 'alice'
exit 0
