#!/bin/sh
# Builds the Debian packages of one board's build with dpkg-deb:
#   tools/deb/build.sh BOARD BUILD_DIR   (make deb BOARD=... runs it)
# BUILD_DIR holds bin/{skyd,skyplan,sky} (built for BOARD); the packages go
# to BUILD_DIR/deb/: sky-board_<version>_<arch>.deb and sky-planner_...
# The version comes from `git describe` made Debian-valid; Depends come from
# dpkg-shlibdeps on the binaries (the libraries' Debian packages for the
# binaries' architecture, :arm64 ones for a cross build).
set -eu
board=$1
b=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
case "$b" in /*) ;; *) b="$repo/$b" ;; esac

# x86_64 -> amd64, aarch64 -> arm64, from the binary itself
case "$(od -An -j18 -N2 -tu2 "$b/bin/skyd" | tr -d ' ')" in
62) arch=amd64 ;;
183) arch=arm64 ;;
*)
	echo "deb: $b/bin/skyd is neither x86-64 nor aarch64" >&2
	exit 1
	;;
esac

# Debian version: v1.2-3-gabc -> 1.2+git3.gabc; no tag -> 0~git<commits>.g<hash>;
# a dirty tree adds +dirty (a package from uncommitted code says so)
desc=$(git -C "$repo" describe --tags --long --dirty 2>/dev/null || true)
if [ -n "$desc" ]; then
	version=$(echo "$desc" | sed -e 's/^v//' -e 's/-dirty$/+dirty/' \
		-e 's/-\([0-9]*\)-g\([0-9a-f]*\)/+git\1.g\2/')
else
	version="0~git$(git -C "$repo" rev-list --count HEAD).g$(git -C "$repo" rev-parse --short HEAD)"
	git -C "$repo" diff --quiet HEAD 2>/dev/null || version="$version+dirty"
fi
case "$version" in
[0-9]*) ;;
*)
	echo "deb: cannot make a Debian version of '$desc'" >&2
	exit 1
	;;
esac
date_r=$(git -C "$repo" log -1 --format=%aD HEAD)

out="$b/deb"
work="$b/deb-work"
rm -rf "$work"
mkdir -p "$out" "$work/debian"
printf 'Source: sky\n\nPackage: sky-board\nArchitecture: any\n\nPackage: sky-planner\nArchitecture: any\n' \
	>"$work/debian/control"

# stage PKG: the tree common to both packages (docs, copyright, changelog)
stage() {
	pkg=$1
	root="$work/debian/$pkg"
	install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" \
		"$root/usr/share/doc/$pkg"
	install -m 0644 "$here/copyright" "$root/usr/share/doc/$pkg/copyright"
	install -m 0644 "$here/$pkg/README.Debian" "$root/usr/share/doc/$pkg/README.Debian"
	{
		echo "sky ($version) unstable; urgency=medium"
		echo
		echo "  * Built from $(git -C "$repo" describe --always --dirty) for board $board."
		echo
		echo " -- Sky maintainers <maintainers@users.noreply.a-seed-cd9daceb.example>  $date_r"
	} | gzip -9n >"$root/usr/share/doc/$pkg/changelog.gz"
	chmod 0644 "$root/usr/share/doc/$pkg/changelog.gz"
	for s in postinst postrm; do
		install -m 0755 "$here/$pkg/$s" "$root/DEBIAN/$s"
	done
	install -m 0644 "$here/$pkg/conffiles" "$root/DEBIAN/conffiles"
}

# binaries stripped of debug info, as Debian ships them
bin() { # PKG NAME
	install -m 0755 "$b/bin/$2" "$work/debian/$1/usr/bin/$2"
	"${STRIP:-strip}" --strip-unneeded --remove-section=.comment --remove-section=.note \
		"$work/debian/$1/usr/bin/$2"
}

stage sky-board
bin sky-board skyd
install -d -m 0755 "$work/debian/sky-board/etc/sky"
install -m 0644 "$repo/boards/$board/profile.conf" "$work/debian/sky-board/etc/sky/profile.conf"
install -m 0644 "$repo/tools/systemd/skyd.service" "$work/debian/sky-board/lib/systemd/system/"

stage sky-planner
bin sky-planner skyplan
bin sky-planner sky
p="$work/debian/sky-planner"
install -m 0644 "$repo/tools/systemd/skyplan.service" "$p/lib/systemd/system/"
install -d -m 0755 "$p/etc/default" "$p/usr/share/bash-completion/completions" \
	"$p/usr/share/doc/sky-planner/examples"
install -m 0644 "$here/sky-planner/skyplan.default" "$p/etc/default/skyplan"
install -m 0644 "$here/sky.bash-completion" "$p/usr/share/bash-completion/completions/sky"
install -m 0644 "$here/sky-planner/mosquitto-sky.conf" "$p/usr/share/doc/sky-planner/examples/"

# Depends: the Debian packages of the libraries the binaries need, with
# the versions their symbols need (the libraries' symbols/shlibs files)
deps() { # PKG BINARY...
	pkg=$1
	shift
	(cd "$work" && CC="${STRIP:-strip}" && CC="${CC%strip}gcc" && export CC && dpkg-architecture -a"$arch" -f -c dpkg-shlibdeps -O "$@" 2>"$work/shlibdeps.err") |
		sed -n 's/^shlibs:Depends=//p'
}

for pkg in sky-board sky-planner; do
	root="$work/debian/$pkg"
	case $pkg in
	sky-board) d=$(deps "$pkg" "debian/$pkg/usr/bin/skyd") ;;
	*) d=$(deps "$pkg" "debian/$pkg/usr/bin/skyplan" "debian/$pkg/usr/bin/sky") ;;
	esac
	if [ -z "$d" ]; then
		echo "deb: dpkg-shlibdeps found no dependencies for $pkg:" >&2
		cat "$work/shlibdeps.err" >&2
		exit 1
	fi
	size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
	sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
		-e "s/@DEPENDS@/$d/" -e "s/@BOARD@/$board/" "$here/$pkg/control.in" >"$root/DEBIAN/control"
	(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort |
		xargs md5sum) >"$root/DEBIAN/md5sums"
	chmod 0644 "$root/DEBIAN/md5sums"
	deb="$out/${pkg}_${version}_${arch}.deb"
	rm -f "$out/${pkg}_"*"_${arch}.deb"
	dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
	echo "deb: $deb"
done
