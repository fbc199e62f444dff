# Install layout and the Debian package built by CPack (cpack -G DEB).
install(TARGETS lockcached RUNTIME DESTINATION bin)
install(FILES etc/lockcached.conf DESTINATION etc/lockcached)
install(FILES etc/lockcached.service DESTINATION lib/systemd/system)
install(FILES README.md LICENSE DESTINATION share/doc/lockcached)
