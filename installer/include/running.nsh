; Close a running Kestrel before its files are replaced or removed, asking first.
;
; Built in only: nsExec runs Windows' own tasklist and taskkill (the nsProcess plugin is
; not part of NSIS, and Qt's window class name changes with every Qt version, so
; FindWindow would miss). Only this user's processes are looked at: on a shared PC
; another user's Kestrel runs from their own per-user install. The engine child runs
; the same executable, so it is found (and closed) with its window.

Var KestrelUser
Var KestrelRunning  ; "1" or "0", set by KestrelIsRunning
Var KestrelClosed   ; "ok" or "cancel", set by CloseRunningKestrel

!macro KESTREL_RUNNING_FUNCTIONS UN STRFUNC_UN
; Whether GUI_EXE or CLI_EXE runs for this user.
Function ${UN}KestrelIsRunning
  Push $0
  ReadEnvStr $KestrelUser USERNAME
  StrCpy $KestrelRunning "0"
  ; tasklist prints one CSV line per process ("Kestrel.exe","1234",...) or an INFO line.
  nsExec::ExecToStack '"$SYSDIR\tasklist.exe" /NH /FO CSV /FI "USERNAME eq $KestrelUser" /FI "IMAGENAME eq ${GUI_EXE}"'
  Pop $0  ; the exit code
  Pop $0  ; what it printed
  !insertmacro STRFUNC_CALL_StrStr "${STRFUNC_UN}" $0 $0 '"${GUI_EXE}"'
  ${If} $0 != ""
    StrCpy $KestrelRunning "1"
  ${EndIf}
  nsExec::ExecToStack '"$SYSDIR\tasklist.exe" /NH /FO CSV /FI "USERNAME eq $KestrelUser" /FI "IMAGENAME eq ${CLI_EXE}"'
  Pop $0
  Pop $0
  !insertmacro STRFUNC_CALL_StrStr "${STRFUNC_UN}" $0 $0 '"${CLI_EXE}"'
  ${If} $0 != ""
    StrCpy $KestrelRunning "1"
  ${EndIf}
  Pop $0
FunctionEnd

; Wait up to 10 s for Kestrel to end; KestrelRunning says whether it still runs.
Function ${UN}KestrelWaitGone
  Push $0
  StrCpy $0 0
  ${Do}
    Call ${UN}KestrelIsRunning
    ${If} $KestrelRunning == "0"
    ${OrIf} $0 >= 20
      ${ExitDo}
    ${EndIf}
    Sleep 500
    IntOp $0 $0 + 1
  ${Loop}
  Pop $0
FunctionEnd

; KestrelClosed is "ok" when no Kestrel of this user runs now (one was closed if the user
; agreed; silent mode agrees), "cancel" when the user said no or it would not close.
Function ${UN}CloseRunningKestrel
  Push $0
  StrCpy $KestrelClosed "ok"
  Call ${UN}KestrelIsRunning
  ${If} $KestrelRunning == "1"
    MessageBox MB_OKCANCEL|MB_ICONEXCLAMATION \
      "${APP_NAME} is running. It has to be closed to go on.$\r$\n$\r$\nYour chats are saved as they are written; an answer still being written stops where it is.$\r$\n$\r$\nClick OK to close ${APP_NAME} now, or Cancel to close it yourself first." \
      /SD IDOK IDOK close_it
    StrCpy $KestrelClosed "cancel"
    Goto done
    close_it:
    DetailPrint "Closing the running ${APP_NAME}..."
    ; Without /F taskkill asks the window to close, as its close button would.
    nsExec::Exec '"$SYSDIR\taskkill.exe" /FI "USERNAME eq $KestrelUser" /IM "${GUI_EXE}"'
    Pop $0
    Call ${UN}KestrelWaitGone
    ${If} $KestrelRunning == "1"
      ; A console kestrel, or a window that does not answer, has to be ended.
      nsExec::Exec '"$SYSDIR\taskkill.exe" /F /T /FI "USERNAME eq $KestrelUser" /IM "${GUI_EXE}" /IM "${CLI_EXE}"'
      Pop $0
      Call ${UN}KestrelWaitGone
    ${EndIf}
    ${If} $KestrelRunning == "1"
      MessageBox MB_OK|MB_ICONSTOP "${APP_NAME} could not be closed. Close it yourself (and any kestrel command in a terminal), then try again." /SD IDOK
      StrCpy $KestrelClosed "cancel"
    ${EndIf}
  ${EndIf}
  done:
  Pop $0
FunctionEnd
!macroend

!insertmacro KESTREL_RUNNING_FUNCTIONS "" ""
!insertmacro KESTREL_RUNNING_FUNCTIONS "un." "Un"
