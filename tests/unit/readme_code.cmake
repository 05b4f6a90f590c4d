# cmake -DREADME=README.md -DOUT=readme_hello.c -P readme_code.cmake
# Writes the README's first ```c block to OUT, so the build compiles and
# CTest runs the code a reader copies (the test readme_hello). Strings, not
# lists: C's semicolons stay.
file(READ "${README}" text)
string(FIND "${text}" "\n```c\n" start)
if(start EQUAL -1)
  message(FATAL_ERROR "${README}: no ```c block")
endif()
math(EXPR start "${start} + 6")
string(SUBSTRING "${text}" ${start} -1 rest)
string(FIND "${rest}" "\n```\n" end)
if(end EQUAL -1)
  message(FATAL_ERROR "${README}: the ```c block is not closed")
endif()
math(EXPR end "${end} + 1")
string(SUBSTRING "${rest}" 0 ${end} code)
# Write only on a change, so an edit elsewhere in the README rebuilds nothing.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL code)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${code}")
