# Packaging: where `cmake --install` puts what, and the Debian package that
# tools/package builds with CPack (`cpack -G DEB` in a Release build configured
# with -DCMAKE_INSTALL_PREFIX=/usr). Included from the top CMakeLists.txt.
include(GNUInstallDirs)

# With the /usr prefix (a distribution package) files go where Debian looks for
# them; with any other prefix (tools/install: /usr/local) beneath the prefix.
set(TIERFS_PYTHON_DIR "" CACHE STRING
    "Where tierfs_hint.py is installed, relative to the prefix (empty: by the prefix)")
set(TIERFS_SYSTEMD_UNIT_DIR "" CACHE STRING
    "Where tierfs@.service is installed, relative to the prefix or absolute (empty: by the prefix)")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(tierfs_python_dir lib/python3/dist-packages)
  set(tierfs_unit_dir /lib/systemd/system)
else()
  set(tierfs_python_dir lib/tierfs/python)
  set(tierfs_unit_dir lib/systemd/system)
endif()
if(TIERFS_PYTHON_DIR)
  set(tierfs_python_dir ${TIERFS_PYTHON_DIR})
endif()
if(TIERFS_SYSTEMD_UNIT_DIR)
  set(tierfs_unit_dir ${TIERFS_SYSTEMD_UNIT_DIR})
endif()
# The daemon's installed path, written into the units and the Slurm library.
set(TIERFS_INSTALLED_BIN ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/tierfs)

# Files that Debian wants compressed with gzip -9n (reproducible: no name, no time).
set(TIERFS_PACKAGING_DIR ${CMAKE_BINARY_DIR}/packaging)
find_program(GZIP_PROGRAM gzip REQUIRED)
function(tierfs_gzip source output)
  add_custom_command(OUTPUT ${output}
                     COMMAND ${GZIP_PROGRAM} -9n -c ${source} > ${output}
                     DEPENDS ${source} VERBATIM)
endfunction()
tierfs_gzip(${PROJECT_SOURCE_DIR}/docs/tierfs.1 ${TIERFS_PACKAGING_DIR}/tierfs.1.gz)
tierfs_gzip(${PROJECT_SOURCE_DIR}/tools/packaging/changelog ${TIERFS_PACKAGING_DIR}/changelog.gz)
add_custom_target(tierfs_packaging_files ALL
                  DEPENDS ${TIERFS_PACKAGING_DIR}/tierfs.1.gz ${TIERFS_PACKAGING_DIR}/changelog.gz)
install(FILES ${PROJECT_SOURCE_DIR}/tools/packaging/copyright ${TIERFS_PACKAGING_DIR}/changelog.gz
              ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/USAGE.md
              ${PROJECT_SOURCE_DIR}/docs/OPERATIONS.md ${PROJECT_SOURCE_DIR}/docs/ARCHITECTURE.md
              ${PROJECT_SOURCE_DIR}/docs/DECISIONS.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- the Debian package ----
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tierfs)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# The Maintainer field: -DTIERFS_PACKAGE_MAINTAINER, else $DEBFULLNAME <$DEBEMAIL>
# as for every Debian tool, else a placeholder for the site to replace.
if(DEFINED ENV{DEBEMAIL})
  set(default_maintainer "$ENV{DEBFULLNAME} <$ENV{DEBEMAIL}>")
else()
  set(default_maintainer "tierfs maintainers <tierfs@example.org>")
endif()
set(TIERFS_PACKAGE_MAINTAINER "${default_maintainer}" CACHE STRING
    "Maintainer field of the Debian package")
set(CPACK_PACKAGE_CONTACT "${TIERFS_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "read-only FUSE mirror of a dataset, served from RAM and local NVMe tiers")
# Absolute destinations (/lib/systemd/system) land in the package, not on this machine.
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # tierfs_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The control file's description: the summary, then this (CPack indents it; an
# empty line becomes " .").
set(CPACK_PACKAGE_DESCRIPTION "tierfs mounts a read-only mirror of a dataset directory that lives on a slow
shared parallel file system (Lustre, GPFS, BeeGFS, NFS) and serves every read
from the fastest place that holds the bytes: process RAM, a node-local NVMe
directory, or the parallel file system itself, promoting files in the
background while a training job reads.

The package holds the daemon (mount -t fuse.tierfs, fstab), the tierfs@
systemd unit, the Slurm prolog and epilog, and the Python helper tierfs_hint
that declares a job's read order.")
# Depends: the libraries the binary links (dpkg-shlibdeps) and mount.fuse3/fusermount3.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS fuse3)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS python3)
# conffiles: the Slurm hooks in /etc/slurm/{prolog,epilog}.d (tools/CMakeLists.txt).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/tools/packaging/postinst ${PROJECT_SOURCE_DIR}/tools/packaging/prerm
    ${PROJECT_SOURCE_DIR}/tools/packaging/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
