# Install layout, and the Debian package built by CPack:
#   cmake -S . -B build-pkg -DCMAKE_INSTALL_PREFIX=/usr && cmake --build build-pkg
#   (cd build-pkg && cpack -G DEB)
# test/ci/50-packaging.sh makes that package from stage 10's build directory
# (the same binaries), installs it and runs it.
include(GNUInstallDirs)

# Configuration lives in /etc for a /usr prefix (GNUInstallDirs' rule), and
# the unit where Debian's packages put theirs; other prefixes keep both
# under the prefix (/usr/local/lib/systemd/system is on systemd's path too).
set(LOCKCACHED_CONF_DIR "${CMAKE_INSTALL_FULL_SYSCONFDIR}/lockcached")
set(LOCKCACHED_CONF_FILE "${LOCKCACHED_CONF_DIR}/lockcached.conf")
set(LOCKCACHED_BINARY_PATH "${CMAKE_INSTALL_FULL_BINDIR}/lockcached")
set(LOCKCACHED_DOC_DIR "${CMAKE_INSTALL_FULL_DOCDIR}")
set(LOCKCACHED_CHECK_PORTS "${CMAKE_INSTALL_FULL_LIBEXECDIR}/lockcached/check-ports")
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(LOCKCACHED_UNIT_DIR_DEFAULT "/lib/systemd/system")
else()
  set(LOCKCACHED_UNIT_DIR_DEFAULT "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
# Given, it stays; empty, it follows the prefix at every configure, so that a
# build directory configured again for another prefix (CI's stage 50 makes
# the package from stage 10's) puts the unit where that prefix does.
set(LOCKCACHED_SYSTEMD_UNIT_DIR "" CACHE PATH
    "Where lockcached.service is installed (empty: where the prefix puts it)")
if(NOT LOCKCACHED_SYSTEMD_UNIT_DIR)
  set(LOCKCACHED_SYSTEMD_UNIT_DIR "${LOCKCACHED_UNIT_DIR_DEFAULT}")
endif()

# Type=notify needs the server to send READY=1, which takes libsystemd
# (LOCKCACHED_WITH_SYSTEMD, set in the top CMakeLists.txt).
if(LOCKCACHED_WITH_SYSTEMD)
  set(LOCKCACHED_SERVICE_TYPE notify)
else()
  set(LOCKCACHED_SERVICE_TYPE simple)
endif()
configure_file(etc/lockcached.service.in ${PROJECT_BINARY_DIR}/etc/lockcached.service @ONLY)
# What the package's postinst asks before it starts the service (and what an
# operator can run after editing the flagfile): are the ports free?
configure_file(cmake/debian/check-ports.in ${PROJECT_BINARY_DIR}/etc/check-ports @ONLY)

install(TARGETS lockcached RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET lockcached-cli)
  install(TARGETS lockcached-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(PROGRAMS ${PROJECT_BINARY_DIR}/etc/check-ports
        DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/lockcached)
install(FILES etc/lockcached.conf DESTINATION ${LOCKCACHED_CONF_DIR})
install(FILES ${PROJECT_BINARY_DIR}/etc/lockcached.service
        DESTINATION ${LOCKCACHED_SYSTEMD_UNIT_DIR})
install(FILES etc/lockcached.logrotate
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/logrotate.d RENAME lockcached)
# Laid out as in the repository, so that the relative links between README.md,
# docs/ and what they cite work in /usr/share/doc/lockcached too.
file(GLOB LOCKCACHED_DOCS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${LOCKCACHED_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(FILES bench/README.md bench/RESULTS.md bench/results.png DESTINATION ${CMAKE_INSTALL_DOCDIR}/bench)
install(FILES etc/nutcracker.yml DESTINATION ${CMAKE_INSTALL_DOCDIR}/etc)
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright)
# A start for keepalived on each node of a cluster (docs/high-availability.md);
# an example, never installed where keepalived would read it unasked.
install(FILES etc/keepalived.conf DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
include(cmake/manpages.cmake)

# The Debian changelog (cmake/debian/changelog) is where the package's
# version comes from: its top entry's upstream part must be project()'s
# version, and its Debian revision becomes CPack's release, so that
# "lockcached (0.1.0-1)" there is the 0.1.0-1 dpkg shows. Installed as
# changelog.Debian.gz (Debian policy 12.7), compressed as dh_compress does.
set(LOCKCACHED_CHANGELOG ${PROJECT_SOURCE_DIR}/cmake/debian/changelog)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${LOCKCACHED_CHANGELOG})
file(STRINGS ${LOCKCACHED_CHANGELOG} LOCKCACHED_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT LOCKCACHED_CHANGELOG_TOP MATCHES "^lockcached \\(([^)-]+)-([^)-]+)\\) ")
  message(FATAL_ERROR "cmake/debian/changelog does not start with an entry "
                      "\"lockcached (VERSION-REVISION) ...\": ${LOCKCACHED_CHANGELOG_TOP}")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "cmake/debian/changelog's top entry is ${CMAKE_MATCH_1}-${CMAKE_MATCH_2}, "
                      "project() says ${PROJECT_VERSION}: add an entry for ${PROJECT_VERSION}")
endif()
set(LOCKCACHED_DEBIAN_REVISION ${CMAKE_MATCH_2})
set(LOCKCACHED_CHANGELOG_GZ ${PROJECT_BINARY_DIR}/debian/changelog.Debian.gz)
add_custom_command(
  OUTPUT ${LOCKCACHED_CHANGELOG_GZ}
  COMMAND ${CMAKE_COMMAND} -E copy ${LOCKCACHED_CHANGELOG} ${PROJECT_BINARY_DIR}/debian/changelog.Debian
  COMMAND gzip -9nf ${PROJECT_BINARY_DIR}/debian/changelog.Debian
  DEPENDS ${LOCKCACHED_CHANGELOG}
  COMMENT "gzip: changelog.Debian.gz"
  VERBATIM)
add_custom_target(changelog ALL DEPENDS ${LOCKCACHED_CHANGELOG_GZ})
install(FILES ${LOCKCACHED_CHANGELOG_GZ} DESTINATION ${CMAKE_INSTALL_DOCDIR})

# --- Debian package ---------------------------------------------------------
set(CPACK_PACKAGE_NAME lockcached)
set(CPACK_PACKAGE_VENDOR "lockcached")
# Maintainer: the project's commit identity, which cmake/debian/changelog's
# trailer names too (test/ci/50-packaging.sh checks that they agree).
set(CPACK_PACKAGE_CONTACT "lockcached maintainers <maintainers@users.noreply.a-seed-1269e54a.example>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "memcached-compatible cache server with server-side locking")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "lockcached serves memcached's text and binary protocols, so any memcached\n"
       "client works unchanged, and adds locks on cached objects plus a named-lock\n"
       "service with fencing tokens. The package runs it as a systemd service.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# 0.1.0-1: the revision from cmake/debian/changelog (above).
set(CPACK_DEBIAN_PACKAGE_RELEASE ${LOCKCACHED_DEBIAN_REVISION})
# The package holds exactly what "cmake --install" puts under this prefix,
# which is what the generated unit points at.
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# dpkg-shlibdeps works out Depends (glog, gflags, jemalloc, libsystemd0, ...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "logrotate")
# The build is RelWithDebInfo; the package ships the binaries without their
# debug information (the server: 6.5 MB with it, 0.3 MB without).
set(CPACK_STRIP_FILES ON)

# Maintainer scripts: enable and start the service as dh_installsystemd's
# would; without systemd running (containers, chroots) they only enable it.
set(LOCKCACHED_DEBIAN_DIR ${PROJECT_BINARY_DIR}/debian)
set(LOCKCACHED_UNIT_NAME lockcached.service)
foreach(script postinst prerm postrm)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/debian/${script}.in ${LOCKCACHED_DEBIAN_DIR}/${script}
                 @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                 GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
# dpkg keeps an admin's changes to conffiles across upgrades.
file(WRITE ${LOCKCACHED_DEBIAN_DIR}/conffiles
     "${LOCKCACHED_CONF_FILE}\n${CMAKE_INSTALL_FULL_SYSCONFDIR}/logrotate.d/lockcached\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${LOCKCACHED_DEBIAN_DIR}/conffiles ${LOCKCACHED_DEBIAN_DIR}/postinst
    ${LOCKCACHED_DEBIAN_DIR}/prerm ${LOCKCACHED_DEBIAN_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
