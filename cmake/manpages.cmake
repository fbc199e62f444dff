# Man pages lockcached(1) and lockcached-cli(1), made by help2man from each
# binary's --help and --version, so that they cannot drift from the
# binaries, plus etc/man/NAME.h2m.in for what --help cannot say (signals,
# exit status, files). Installed gzipped into share/man/man1.
#   LOCKCACHED_MAN_PAGES=AUTO  where help2man is found (apt-get install
#                              help2man), not in sanitizer or cross builds
#   LOCKCACHED_MAN_PAGES=ON    always; a build without help2man fails (the
#                              package build, test/ci/50-packaging.sh)
# help2man dates a page with $SOURCE_DATE_EPOCH when that is set.
set(LOCKCACHED_MAN_PAGES AUTO CACHE STRING "Man pages with help2man: AUTO, ON or OFF")
set_property(CACHE LOCKCACHED_MAN_PAGES PROPERTY STRINGS AUTO ON OFF)

set(LOCKCACHED_MAN_PAGE_TARGETS lockcached)
if(TARGET lockcached-cli)
  list(APPEND LOCKCACHED_MAN_PAGE_TARGETS lockcached-cli)
endif()

if(LOCKCACHED_MAN_PAGES STREQUAL "ON")
  find_program(HELP2MAN_EXECUTABLE help2man)
  if(NOT HELP2MAN_EXECUTABLE)
    message(FATAL_ERROR "help2man not found: apt-get install help2man "
                        "(or configure with -DLOCKCACHED_MAN_PAGES=AUTO)")
  endif()
elseif(LOCKCACHED_MAN_PAGES STREQUAL "AUTO")
  # help2man runs the binaries: not possible when cross-compiling, and an
  # ASan build's leak check at gflags' exit() after --help would fail it.
  if(NOT CMAKE_CROSSCOMPILING AND NOT LOCKCACHED_BUILD_TYPE_UPPER MATCHES "^(ASAN|TSAN)$")
    find_program(HELP2MAN_EXECUTABLE help2man)
  endif()
elseif(NOT LOCKCACHED_MAN_PAGES STREQUAL "OFF")
  message(FATAL_ERROR "LOCKCACHED_MAN_PAGES is AUTO, ON or OFF, not ${LOCKCACHED_MAN_PAGES}")
endif()

if(HELP2MAN_EXECUTABLE)
  foreach(program ${LOCKCACHED_MAN_PAGE_TARGETS})
    set(include ${PROJECT_BINARY_DIR}/man/${program}.h2m)
    set(page ${PROJECT_BINARY_DIR}/man/${program}.1)
    configure_file(etc/man/${program}.h2m.in ${include} @ONLY)
    add_custom_command(
      OUTPUT ${page}.gz
      COMMAND ${CMAKE_COMMAND} -E env HELP2MAN_PROGRAM=$<TARGET_FILE:${program}>
              ${HELP2MAN_EXECUTABLE} --no-info --section=1 --include=${include}
              --output=${page} ${PROJECT_SOURCE_DIR}/cmake/help2man-wrapper.sh
      COMMAND gzip -9nf ${page}
      DEPENDS ${program} ${include} ${PROJECT_SOURCE_DIR}/cmake/help2man-wrapper.sh
      COMMENT "help2man: ${program}(1)"
      VERBATIM)
    add_custom_target(${program}-man ALL DEPENDS ${page}.gz)
    install(FILES ${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endforeach()
  list(JOIN LOCKCACHED_MAN_PAGE_TARGETS ", " names)
  message(STATUS "Man pages: ${names} (help2man)")
elseif(NOT LOCKCACHED_MAN_PAGES STREQUAL "OFF")
  message(STATUS "Man pages: none (help2man not found, or a sanitizer or cross build)")
endif()
