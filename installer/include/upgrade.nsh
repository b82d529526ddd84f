; Update an existing install in place: the previous version's own uninstaller removes
; its program files (it knows what it put there, even files this version no longer has),
; so a one-folder build never mixes libraries of two versions. User data is never
; touched by this, and Start-menu pins survive because the shortcut stays.

Var PreviousDir      ; where the registry says Kestrel is installed ("" if it is not)
Var PreviousVersion

Function FindPreviousInstall
  ReadRegStr $PreviousDir HKCU "${UNINSTALL_KEY}" "InstallLocation"
  ReadRegStr $PreviousVersion HKCU "${UNINSTALL_KEY}" "DisplayVersion"
FunctionEnd

; $0: the folder of an earlier install; $1: "/UPGRADE" to keep its shortcuts and entry.
Function RunOldUninstaller
  ${If} ${FileExists} "$0\${UNINSTALLER}"
    DetailPrint "Removing the program files of the installed ${APP_NAME} $PreviousVersion (your chats, settings and models stay)"
    ; _?= runs it in place and waits for it (otherwise it copies itself to %TEMP% and returns).
    ExecWait '"$0\${UNINSTALLER}" /S $1 _?=$0' $2
    ${If} $2 != 0
      DetailPrint "The earlier uninstaller ended with code $2; its files are overwritten instead."
    ${EndIf}
    Delete "$0\${UNINSTALLER}"
    RMDir "$0"
  ${EndIf}
FunctionEnd

Function RemovePreviousInstall
  Push $0
  Push $1
  Push $2
  ${If} $PreviousDir != ""
  ${AndIf} $PreviousDir != $INSTDIR
    ; Moved to another folder: the old shortcuts would point at nothing, so they go too.
    StrCpy $0 $PreviousDir
    StrCpy $1 ""
    Call RunOldUninstaller
  ${EndIf}
  StrCpy $0 $INSTDIR
  StrCpy $1 "/UPGRADE"
  Call RunOldUninstaller
  Pop $2
  Pop $1
  Pop $0
FunctionEnd
