package beanstalk

import "syscall"

// system returns the host's node name, kernel version and machine, as
// uname(2) gives them.
func system() sysInfo {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return fallbackSystem()
	}
	return sysInfo{hostname: cstring(u.Nodename[:]), os: cstring(u.Version[:]), platform: cstring(u.Machine[:])}
}

// cstring returns the NUL-terminated string in b.
func cstring[T int8 | uint8](b []T) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}
